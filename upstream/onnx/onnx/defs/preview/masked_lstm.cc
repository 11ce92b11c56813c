// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

// MaskedLSTM: LSTM-22 with an optional boolean `mask` input (steps to skip anywhere in a sequence)
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
Computes a one-layer LSTM over sequences that may have masked steps anywhere.
It is LSTM-22 (the same inputs in the same positions, attributes, defaults, outputs and cell
equations) with one more optional input, `mask`, and one more attribute, `masked_output`. A
masked step leaves the state unchanged, its input reaches no output, and `masked_output` says
what the output holds there. With `mask` absent and `masked_output` at its default, the operator
computes what LSTM-22 computes, `sequence_lens` included, with one exception: for a row of
length 0, whose Y_h, Y_c LSTM-22 leaves undefined, Y_h, Y_c is the initial state. Replacing
an LSTM-22 node by a MaskedLSTM node changes nothing else.
)DOC",
    R"DOC(
`clip` bounds the arguments of f and g, not the cell state Ct, not even as the argument of h. With
`input_forget` = 1 the forget gate is ft = 1 - it.
)DOC",
    R"DOC(
* `direction` not one of forward, reverse, bidirectional;
* `layout` not 0 or 1;
* `masked_output` not one of zero, carry;
* `input_forget` not 0 or 1;
* `clip` NaN, zero or negative;
* `hidden_size` zero or negative;
* `activations` of another length than 3 times num_directions, or naming a function that is not one
  of the activation functions;
* values of `activation_alpha` or `activation_beta` that no function consumes;
* an input of another element type than its type constraint allows, or float inputs of different
  types;
* `X`, `W`, `R`, `initial_h`, `initial_c` not of rank 3, `B`, `P`, `mask` not of rank 2,
  `sequence_lens` not of rank 1;
* a known dimension that contradicts another: `W` not `[num_directions, 4*hidden_size, input_size]`,
  `R` not `[num_directions, 4*hidden_size, hidden_size]`, `B` not `[num_directions, 8*hidden_size]`,
  `P` not `[num_directions, 3*hidden_size]`, `initial_h`/`initial_c` not the state shape of
  `layout`, `sequence_lens` not `[batch_size]`, `mask` not the first two axes of `X` (hidden_size
  from the attribute when given, else from `R`; num_directions from `direction`);
* a constant `sequence_lens` with a value outside [0, seq_length], seq_length known.
)DOC",
    "(H't, C't)",
    "(Ht-1, Ct-1)",
    "(Ht, Ct)",
    "Y_h, Y_c",
    "initial_h, initial_c",
    R"DOC(
What `Y` holds at a skipped step (mask false or `t >= sequence_lens[b]`). `zero` (default): 0; with `mask` absent the operator then computes what LSTM-22 computes. `carry`: the `Y` of the previous processed step of the same direction, 0 before the first processed step. Any other value is an error. The state and `Y_h` and `Y_c` do not depend on it.
)DOC"};
// END GENERATED doc

const MaskedOp kMaskedLSTM{"MaskedLSTM", 4, 3, 8, "input_forget", "iof", "c", {"Sigmoid", "Tanh", "Tanh"}, kDoc};

// The LSTM-22 cell, as the package's lstm_cell writes it (onnx_masked_rnn/functions/cells.py): the
// gates i, o, f (activation f) apart from c; X·Wᵀ + Wb + Rb before the Scan.
void LSTMCell(
    const FunctionBodyBuildContext& ctx,
    const MaskedRNNAttributes& attrs,
    int d,
    BodyText& text,
    ScanParts& parts,
    BodyText& step) {
  const std::string s = "_" + std::to_string(d);
  const auto& acts = attrs.activations[d];
  std::string xw_iof = "xw_iof" + s, xw_c = "xw_c" + s;
  if (ctx.hasInput(3)) {
    text.AddFor(d, R"ONNX(
      b{d} = Add (Wb{d}, Rb{d})
      b_iof{d}, b_c{d} = Split <axis = 0> (b{d}, gate_split)
      xw_iof_b{d} = Add (xw_iof{d}, b_iof{d})
      xw_c_b{d} = Add (xw_c{d}, b_c{d})
    )ONNX");
    xw_iof = "xw_iof_b" + s;
    xw_c = "xw_c_b" + s;
  }
  const bool peepholes = ctx.hasInput(7);
  if (peepholes) {
    text.AddFor(d, R"ONNX(
      P{d} = Gather <axis = 0> (P, dir{d})
      p_i{d}, p_o{d}, p_f{d} = Split <axis = 0, num_outputs = 3> (P{d})
    )ONNX");
    for (const char* gate : {"p_i", "p_o", "p_f"})
      parts.pass_through.push_back({gate + s, gate, 1});
  }
  parts.scan_inputs = {{TimeMajor(text, attrs, xw_iof), "xw_iof_t"}, {TimeMajor(text, attrs, xw_c), "xw_c_t"}};

  if (attrs.input_forget)
    step.Scalar("one", 1.0f);
  step.Add(R"ONNX(
    h_r_iof = MatMul (h_prev, R_iof_t)
    x_iof = Add (xw_iof_t, h_r_iof)
    h_r_c = MatMul (h_prev, R_c_t)
    x_c = Add (xw_c_t, h_r_c)
  )ONNX");
  step.Apply(acts[1], step.Clip(attrs, "x_c"), "g_c");
  if (peepholes) { // i and f see c_prev, o sees the new c: the gates are activated one by one
    step.Add(R"ONNX(
      x_i, x_o, x_f = Split <axis = -1, num_outputs = 3> (x_iof)
      p_i_c = Mul (p_i, c_prev)
      x_i_p = Add (x_i, p_i_c)
    )ONNX");
    step.Apply(acts[0], step.Clip(attrs, "x_i_p"), "i");
    if (!attrs.input_forget) {
      step.Add(R"ONNX(
        p_f_c = Mul (p_f, c_prev)
        x_f_p = Add (x_f, p_f_c)
      )ONNX");
      step.Apply(acts[0], step.Clip(attrs, "x_f_p"), "forget");
    }
  } else { // f activates i, o, f in one call
    step.Apply(acts[0], step.Clip(attrs, "x_iof"), "iof");
    step.Add(
        attrs.input_forget ? "i, o, f_unused = Split <axis = -1, num_outputs = 3> (iof)"
                           : "i, o, forget = Split <axis = -1, num_outputs = 3> (iof)");
  }
  if (attrs.input_forget)
    step.Add("forget = Sub (one, i)");
  step.Add(R"ONNX(
    forget_c = Mul (forget, c_prev)
    i_g = Mul (i, g_c)
    c_new = Add (forget_c, i_g)
  )ONNX");
  if (peepholes) {
    step.Add(R"ONNX(
      p_o_c = Mul (p_o, c_new)
      x_o_p = Add (x_o, p_o_c)
    )ONNX");
    step.Apply(acts[0], step.Clip(attrs, "x_o_p"), "o");
  }
  step.Apply(acts[2], "c_new", "h_c");
  step.Add("h_new = Mul (o, h_c)");
}

} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedLSTM,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, LSTM)>().FillUsing(
        masked_rnn::MaskedRNNSchema(kMaskedLSTM, LSTMCell)));

} // namespace ONNX_NAMESPACE
