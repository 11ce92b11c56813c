// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

// MaskedRNN: RNN-22 with an optional boolean `mask` input (steps to skip anywhere in a sequence)
// and a `masked_output` attribute; its function body is one Scan + Where per direction.

#include <string>

#include "onnx/defs/function.h"
#include "onnx/defs/operator_sets.h"
#include "onnx/defs/preview/masked_rnn_utils.h"
#include "onnx/defs/schema.h"

namespace ONNX_NAMESPACE {

namespace {

using namespace masked_rnn;

// The doc text, from the package's one source of it.
// BEGIN GENERATED doc by scripts/generate_upstream_doc.py from onnx_masked_rnn/schema_doc.py; do not edit
constexpr const char* kDocHead = R"DOC(
Computes a one-layer RNN over sequences that may have masked steps anywhere.
It is RNN-22 (the same inputs in the same positions, attributes, defaults, outputs and cell
equations) with one more optional input, `mask`, and one more attribute, `masked_output`. A
masked step leaves the state unchanged, its input reaches no output, and `masked_output` says
what the output holds there. With `mask` absent and `masked_output` at its default, the operator
computes what RNN-22 computes, `sequence_lens` included, with one exception: for a row of
length 0, whose Y_h RNN-22 leaves undefined, Y_h is the initial state. Replacing
an RNN-22 node by a MaskedRNN node changes nothing else.
)DOC";
constexpr const char* kDocTail = R"DOC(
Each activation function is the ONNX operator of the same name; Affine(x) = alpha*x + beta and
ScaledTanh(x) = alpha*Tanh(beta*x). Walking `activations` in order, each function that takes alpha
consumes the next unused value of `activation_alpha`, each that takes beta the next unused value of
`activation_beta`, and a function that does not take a parameter consumes none; a function that
finds the list exhausted takes its default (alpha: Affine 1, LeakyRelu 0.01, ThresholdedRelu 1,
ScaledTanh 1, HardSigmoid 0.2, Elu 1; beta: Affine 0, ScaledTanh 1, HardSigmoid 0.5: the ONNX
operators' defaults, and for Affine and ScaledTanh those of this specification). Values that no
function consumes are an error. Names are matched without regard to letter case.

`clip` bounds the argument of f. As RNN-22's default `activations` [Tanh, Tanh] does, a forward or
reverse node may list two functions: the first is used.

Masking (per direction, steps in processing order: t = 0 .. seq_length-1 forward,
seq_length-1 .. 0 reverse; "previous" means previously processed):

* mt = mask[t] AND t < sequence_lens       (an absent mask or sequence_lens is all true)
* H't = the cell equations applied to Xt and Ht-1
* Ht = mt ? H't : Ht-1
* Yt = mt ? H't : (zero: 0 | carry: the previous Y of this direction, 0 before the first
  processed step)
* Y_h = the state after the last step: initial_h (0 if absent) for a row with no
  processed step, including every row when seq_length is 0.

`a ? b : c` selects per row: a value of X at a skipped step reaches no output, and NaN or Inf
there changes no output. Outputs are time-aligned in every direction: Yt belongs to input step t,
and the reverse direction of a row starts at its last processed step.

Empty inputs:

batch_size 0 and seq_length 0 are valid, not errors. With batch_size 0 every output is empty.
With seq_length 0, Y is empty and Y_h is initial_h (0 if absent); `sequence_lens`,
if given, is then all 0.

Element types:

The float inputs and the outputs share one type T; `sequence_lens` is int32 and `mask` is bool.
The float attributes hold float32 values. In float and double the result is that of the equations
in that type, up to rounding; in float16 and bfloat16 an implementation may compute in the type or
in a wider one, and round the outputs to T.

Errors:

Shape inference rejects a node with any of these, each decidable from attributes, element types,
known dimensions and constant inputs:

* `direction` not one of forward, reverse, bidirectional;
* `layout` not 0 or 1;
* `masked_output` not one of zero, carry;
* `clip` NaN, zero or negative;
* `hidden_size` zero or negative;
* `activations` of another length than 1 times num_directions (a forward or reverse node may also
  list 2), or naming a function that is not one of the activation functions;
* values of `activation_alpha` or `activation_beta` that no function consumes;
* an input of another element type than its type constraint allows, or float inputs of different
  types;
* `X`, `W`, `R`, `initial_h` not of rank 3, `B`, `mask` not of rank 2, `sequence_lens` not of rank
  1;
* a known dimension that contradicts another: `W` not `[num_directions, 1*hidden_size, input_size]`,
  `R` not `[num_directions, 1*hidden_size, hidden_size]`, `B` not `[num_directions, 2*hidden_size]`,
  `initial_h` not the state shape of `layout`, `sequence_lens` not `[batch_size]`, `mask` not the
  first two axes of `X` (hidden_size from the attribute when given, else from `R`; num_directions
  from `direction`);
* a constant `sequence_lens` with a value outside [0, seq_length], seq_length known.

At run time an implementation rejects what shape inference could not see: the same shape
conditions on the actual tensors, and `sequence_lens` values outside [0, seq_length]. The
function body rejects at run time a `mask` that is not the shape of the first two axes of X (it
concatenates `mask` with a tensor of that shape); it checks no other run-time condition, and for
inputs that violate one what it computes is undefined.
)DOC";
constexpr const char* kMaskDoc = R"DOC(
Optional boolean tensor marking the steps to process; a false entry skips that step of that row: the state is carried across it unchanged, its value of `X` reaches no output, and `Y` at that step is set by `masked_output`. It has the shape of the first two axes of `X`: `[seq_length, batch_size]` if `layout` is 0, `[batch_size, seq_length]` if 1. If not specified - assumed all true.
)DOC";
constexpr const char* kMaskedOutputDoc = R"DOC(
What `Y` holds at a skipped step (mask false or `t >= sequence_lens[b]`). `zero` (default): 0; with `mask` absent the operator then computes what RNN-22 computes. `carry`: the `Y` of the previous processed step of the same direction, 0 before the first processed step. Any other value is an error. The state and `Y_h` do not depend on it.
)DOC";
// END GENERATED doc

const MaskedOp kMaskedRNN{
    "MaskedRNN",
    1,
    1,
    6,
    nullptr,
    nullptr,
    nullptr,
    {"Tanh"},
    kDocHead,
    kDocTail,
    kMaskDoc,
    kMaskedOutputDoc};

// The RNN-22 cell, as the package's rnn_cell writes it (onnx_masked_rnn/functions/cells.py).
void RNNCell(
    const FunctionBodyBuildContext& ctx,
    const MaskedRNNAttributes& attrs,
    int d,
    BodyText& text,
    ScanParts& parts,
    BodyText& step) {
  std::string xw = "xw_" + std::to_string(d);
  if (ctx.hasInput(3)) {
    text.AddFor(d, R"ONNX(
      b{d} = Add (Wb{d}, Rb{d})
      xw_b{d} = Add (xw{d}, b{d})
    )ONNX");
    xw = "xw_b_" + std::to_string(d);
  }
  parts.scan_inputs = {{TimeMajor(text, attrs, xw), "xw_t"}};
  step.Add(R"ONNX(
    h_r = MatMul (h_prev, R_t)
    x_h = Add (xw_t, h_r)
  )ONNX");
  step.Apply(attrs.activations[d][0], step.Clip(attrs, "x_h"), "h_new");
}

bool BuildMaskedRNNFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto) {
  return BuildFunctionBody(ctx, schema, functionProto, kMaskedRNN, RNNCell);
}
} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedRNN,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, RNN)>()
        .FillUsing(masked_rnn::MaskedRNNSchema(kMaskedRNN))
        .SetContextDependentFunctionBodyBuilder(BuildMaskedRNNFunctionBody, 1));

} // namespace ONNX_NAMESPACE
