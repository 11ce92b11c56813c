// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

// MaskedGRU: GRU-22 with an optional boolean `mask` input (steps to skip anywhere in a sequence)
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
Computes a one-layer GRU over sequences that may have masked steps anywhere.
It is GRU-22 (the same inputs in the same positions, attributes, defaults, outputs and cell
equations) with one more optional input, `mask`, and one more attribute, `masked_output`. A
masked step leaves the state unchanged, its input reaches no output, and `masked_output` says
what the output holds there. With `mask` absent and `masked_output` at its default, the operator
computes what GRU-22 computes, `sequence_lens` included, with one exception: for a row of
length 0, whose Y_h GRU-22 leaves undefined, Y_h is the initial state. Replacing
a GRU-22 node by a MaskedGRU node changes nothing else.
)DOC",
    R"DOC(
`clip` bounds the arguments of f and g.
)DOC",
    R"DOC(
* `direction` not one of forward, reverse, bidirectional;
* `layout` not 0 or 1;
* `masked_output` not one of zero, carry;
* `linear_before_reset` not 0 or 1;
* `clip` NaN, zero or negative;
* `hidden_size` zero or negative;
* `activations` of another length than 2 times num_directions, or naming a function that is not one
  of the activation functions;
* values of `activation_alpha` or `activation_beta` that no function consumes;
* an input of another element type than its type constraint allows, or float inputs of different
  types;
* `X`, `W`, `R`, `initial_h` not of rank 3, `B`, `mask` not of rank 2, `sequence_lens` not of rank
  1;
* a known dimension that contradicts another: `W` not `[num_directions, 3*hidden_size, input_size]`,
  `R` not `[num_directions, 3*hidden_size, hidden_size]`, `B` not `[num_directions, 6*hidden_size]`,
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
What `Y` holds at a skipped step (mask false or `t >= sequence_lens[b]`). `zero` (default): 0; with `mask` absent the operator then computes what GRU-22 computes. `carry`: the `Y` of the previous processed step of the same direction, 0 before the first processed step. Any other value is an error. The state and `Y_h` do not depend on it.
)DOC"};
// END GENERATED doc

const MaskedOp kMaskedGRU{"MaskedGRU", 3, 2, 6, "linear_before_reset", "zr", "h", {"Sigmoid", "Tanh"}, kDoc};

// The GRU-22 cell, as the package's gru_cell writes it (onnx_masked_rnn/functions/cells.py): the
// gates z, r (activation f) apart from h (activation g); X·Wᵀ + Wb + Rb before the Scan, without
// Rbh when linear_before_reset is 1 (it is added to Ht-1·Rhᵀ inside the step).
void GRUCell(
    const FunctionBodyBuildContext& ctx,
    const MaskedRNNAttributes& attrs,
    int d,
    BodyText& text,
    ScanParts& parts,
    BodyText& step) {
  const std::string s = "_" + std::to_string(d);
  const auto& acts = attrs.activations[d];
  const bool reset_bias = attrs.linear_before_reset && ctx.hasInput(3);
  std::string xw_zr = "xw_zr" + s, xw_h = "xw_h" + s;
  if (ctx.hasInput(3)) {
    text.AddFor(d, R"ONNX(
      Wb_zr{d}, Wb_h{d} = Split <axis = 0> (Wb{d}, gate_split)
      Rb_zr{d}, Rb_h{d} = Split <axis = 0> (Rb{d}, gate_split)
      b_zr{d} = Add (Wb_zr{d}, Rb_zr{d})
      xw_zr_b{d} = Add (xw_zr{d}, b_zr{d})
    )ONNX");
    text.AddFor(
        d,
        attrs.linear_before_reset ? "xw_h_b{d} = Add (xw_h{d}, Wb_h{d})"
                                  : "b_h{d} = Add (Wb_h{d}, Rb_h{d})\nxw_h_b{d} = Add (xw_h{d}, b_h{d})");
    xw_zr = "xw_zr_b" + s;
    xw_h = "xw_h_b" + s;
  }
  if (reset_bias)
    parts.pass_through.push_back({"Rb_h" + s, "Rb_h", 1});
  parts.scan_inputs = {{TimeMajor(text, attrs, xw_zr), "xw_zr_t"}, {TimeMajor(text, attrs, xw_h), "xw_h_t"}};

  step.Add(R"ONNX(
    h_r_zr = MatMul (h_prev, R_zr_t)
    x_zr = Add (xw_zr_t, h_r_zr)
  )ONNX");
  step.Apply(acts[0], step.Clip(attrs, "x_zr"), "zr");
  step.Add("z, r = Split <axis = -1, num_outputs = 2> (zr)");
  if (attrs.linear_before_reset) {
    step.Add(
        reset_bias ? "h_r_h_nb = MatMul (h_prev, R_h_t)\nh_r_h = Add (h_r_h_nb, Rb_h)"
                   : "h_r_h = MatMul (h_prev, R_h_t)");
    step.Add(R"ONNX(
      r_h = Mul (r, h_r_h)
      x_h = Add (xw_h_t, r_h)
    )ONNX");
  } else {
    step.Add(R"ONNX(
      r_h = Mul (r, h_prev)
      r_h_r = MatMul (r_h, R_h_t)
      x_h = Add (xw_h_t, r_h_r)
    )ONNX");
  }
  step.Apply(acts[1], step.Clip(attrs, "x_h"), "candidate");
  // (1 - z) ⊙ candidate + z ⊙ Ht-1 as written (rearranged, it differs at overflow)
  step.Scalar("one", 1.0f);
  step.Add(R"ONNX(
    one_minus_z = Sub (one, z)
    keep = Mul (one_minus_z, candidate)
    z_h = Mul (z, h_prev)
    h_new = Add (keep, z_h)
  )ONNX");
}
} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedGRU,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, GRU)>().FillUsing(
        masked_rnn::MaskedRNNSchema(kMaskedGRU, GRUCell)));

} // namespace ONNX_NAMESPACE
