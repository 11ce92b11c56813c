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

bool BuildMaskedLSTMFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto) {
  const TypeProto* x_type = ctx.getInputType(0);
  if (x_type == nullptr || !x_type->has_tensor_type() || ElemTypeName(x_type->tensor_type().elem_type()).empty())
    return false;
  MaskedRNNAttributes attrs;
  if (!ReadAttributes(ctx, {"Sigmoid", "Tanh", "Tanh"}, attrs))
    return false;
  BodyText text(x_type->tensor_type().elem_type());
  const bool masked = AddPrologue(text, ctx, attrs, 4, 5, 6, 8);
  text << "iof_count = Constant <value_ints = [3]> ()";
  text << "H_iof = Mul (H, iof_count)";
  text << "iof_c = Concat <axis = 0> (H_iof, H)";
  for (int d = 0; d < attrs.num_directions(); ++d) {
    const std::string s = "_" + std::to_string(d);
    const auto& acts = attrs.activations[d];
    text << "dir" + s + " = Constant <value_int = " + std::to_string(d) + "> ()";
    // Everything independent of the state is computed once, before the Scan: the input
    // projections of all steps with both biases, the gates i, o, f (activation f) apart from c.
    text << "W" + s + " = Gather <axis = 0> (W, dir" + s + ")";
    text << "W_t" + s + " = Transpose (W" + s + ")";
    text << "W_iof_t" + s + ", W_c_t" + s + " = Split <axis = -1> (W_t" + s + ", iof_c)";
    text << "R" + s + " = Gather <axis = 0> (R, dir" + s + ")";
    text << "R_t" + s + " = Transpose (R" + s + ")";
    text << "R_iof_t" + s + ", R_c_t" + s + " = Split <axis = -1> (R_t" + s + ", iof_c)";
    std::string xw_iof = "xw_iof" + s, xw_c = "xw_c" + s;
    text << xw_iof + " = MatMul (x, W_iof_t" + s + ")";
    text << xw_c + " = MatMul (x, W_c_t" + s + ")";
    if (ctx.hasInput(3)) {
      text << "B" + s + " = Gather <axis = 0> (B, dir" + s + ")";
      text << "Wb" + s + ", Rb" + s + " = Split <axis = 0, num_outputs = 2> (B" + s + ")";
      text << "b" + s + " = Add (Wb" + s + ", Rb" + s + ")";
      text << "b_iof" + s + ", b_c" + s + " = Split <axis = 0> (b" + s + ", iof_c)";
      text << "xw_iof_b" + s + " = Add (" + xw_iof + ", b_iof" + s + ")";
      text << "xw_c_b" + s + " = Add (" + xw_c + ", b_c" + s + ")";
      xw_iof = "xw_iof_b" + s;
      xw_c = "xw_c_b" + s;
    }
    ScanParts parts;
    parts.states.push_back({InitialState(text, ctx.hasInput(5), "h0_all", "h0", d), "h", "h_new"});
    parts.states.push_back({InitialState(text, ctx.hasInput(6), "c0_all", "c0", d), "c", "c_new"});
    parts.pass_through.push_back({"R_iof_t" + s, "R_iof_t", 2});
    parts.pass_through.push_back({"R_c_t" + s, "R_c_t", 2});
    const bool peepholes = ctx.hasInput(7);
    if (peepholes) {
      text << "P" + s + " = Gather <axis = 0> (P, dir" + s + ")";
      text << "p_i" + s + ", p_o" + s + ", p_f" + s + " = Split <axis = 0, num_outputs = 3> (P" + s + ")";
      for (const char* gate : {"p_i", "p_o", "p_f"})
        parts.pass_through.push_back({gate + s, gate, 1});
    }
    parts.scan_inputs = {{xw_iof, "xw_iof_t"}, {xw_c, "xw_c_t"}};

    BodyText step(text.elem_type());
    step.BodyConstants(attrs);
    if (attrs.input_forget)
      step.Scalar("one", 1.0f);
    step << "h_r_iof = MatMul (h_prev, R_iof_t)";
    step << "x_iof = Add (xw_iof_t, h_r_iof)";
    step << "h_r_c = MatMul (h_prev, R_c_t)";
    step << "x_c = Add (xw_c_t, h_r_c)";
    step.Apply(acts[1], step.Clip(attrs, "x_c"), "g_c");
    if (peepholes) {
      step << "x_i, x_o, x_f = Split <axis = -1, num_outputs = 3> (x_iof)";
      step << "p_i_c = Mul (p_i, c_prev)";
      step << "x_i_p = Add (x_i, p_i_c)";
      step.Apply(acts[0], step.Clip(attrs, "x_i_p"), "i");
      if (attrs.input_forget) {
        step << "forget = Sub (one, i)";
      } else {
        step << "p_f_c = Mul (p_f, c_prev)";
        step << "x_f_p = Add (x_f, p_f_c)";
        step.Apply(acts[0], step.Clip(attrs, "x_f_p"), "forget");
      }
      step << "forget_c = Mul (forget, c_prev)";
      step << "i_g = Mul (i, g_c)";
      step << "c_new = Add (forget_c, i_g)";
      step << "p_o_c = Mul (p_o, c_new)";
      step << "x_o_p = Add (x_o, p_o_c)";
      step.Apply(acts[0], step.Clip(attrs, "x_o_p"), "o");
    } else { // f applies to i, o, f in one call
      step.Apply(acts[0], step.Clip(attrs, "x_iof"), "iof");
      if (attrs.input_forget) {
        step << "i, o, f_unused = Split <axis = -1, num_outputs = 3> (iof)";
        step << "forget = Sub (one, i)";
      } else {
        step << "i, o, forget = Split <axis = -1, num_outputs = 3> (iof)";
      }
      step << "forget_c = Mul (forget, c_prev)";
      step << "i_g = Mul (i, g_c)";
      step << "c_new = Add (forget_c, i_g)";
    }
    step.Apply(acts[2], "c_new", "h_c");
    step << "h_new = Mul (o, h_c)";
    AddDirectionScan(text, attrs, d, masked, ctx.hasInput(5), parts, step);
  }
  AddEpilogue(text, attrs, true);

  FunctionBuilder builder(functionProto);
  builder.AddOpset("", kBodyOpset);
  builder.Add(GuardEmpty(text, attrs, true, ctx.hasInput(5), ctx.hasInput(6)).c_str());
  schema.BuildFunction(functionProto);
  return true;
}

} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedLSTM,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, LSTM)>()
        .FillUsing(
            masked_rnn::MaskedRNNDocGenerator(
                "LSTM",
                "(H't, C't)",
                "(Ht-1, Ct-1)",
                "(Ht, Ct)",
                "Y_h, Y_c",
                "initial_h, initial_c",
                8))
        .SetContextDependentFunctionBodyBuilder(BuildMaskedLSTMFunctionBody, 1));

} // namespace ONNX_NAMESPACE
