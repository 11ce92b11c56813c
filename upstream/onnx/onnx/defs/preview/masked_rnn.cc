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

// The doc text (DocText), from the package's one source of it.
// BEGIN GENERATED doc by scripts/generate_upstream_doc.py from onnx_masked_rnn/schema_doc.py; do not edit
constexpr DocText kDoc{
    R"DOC(
Computes a one-layer RNN over sequences that may have masked steps anywhere.
It is RNN-22 (the same inputs in the same positions, attributes, defaults, outputs and cell
equations) with one more optional input, `mask`, and one more attribute, `masked_output`. A
masked step leaves the state unchanged, its input reaches no output, and `masked_output` says
what the output holds there. With `mask` absent and `masked_output` at its default, the operator
computes what RNN-22 computes, `sequence_lens` included, with one exception: for a row of
length 0, whose Y_h RNN-22 leaves undefined, Y_h is the initial state. Replacing
an RNN-22 node by a MaskedRNN node changes nothing else.
)DOC",
    R"DOC(
`clip` bounds the argument of f. As RNN-22's default `activations` [Tanh, Tanh] does, a forward or
reverse node may list two functions: the first is used.
)DOC",
    R"DOC(
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
)DOC",
    "H't",
    "Ht-1",
    "Ht",
    "Y_h",
    "initial_h",
    R"DOC(
What `Y` holds at a skipped step (mask false or `t >= sequence_lens[b]`). `zero` (default): 0; with `mask` absent the operator then computes what RNN-22 computes. `carry`: the `Y` of the previous processed step of the same direction, 0 before the first processed step. Any other value is an error. The state and `Y_h` do not depend on it.
)DOC"};
// END GENERATED doc

const MaskedOp kMaskedRNN{"MaskedRNN", 1, 1, 6, nullptr, nullptr, nullptr, {"Tanh"}, kDoc};

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
} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedRNN,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, RNN)>().FillUsing(
        masked_rnn::MaskedRNNSchema(kMaskedRNN, RNNCell)));

} // namespace ONNX_NAMESPACE
