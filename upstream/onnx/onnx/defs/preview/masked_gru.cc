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

bool BuildMaskedGRUFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto) {
  const TypeProto* x_type = ctx.getInputType(0);
  if (x_type == nullptr || !x_type->has_tensor_type() || ElemTypeName(x_type->tensor_type().elem_type()).empty())
    return false;
  MaskedRNNAttributes attrs;
  if (!ReadAttributes(ctx, {"Sigmoid", "Tanh"}, attrs))
    return false;
  BodyText text(x_type->tensor_type().elem_type());
  const bool masked = AddPrologue(text, ctx, attrs, 4, 5, -1, 6);
  text << "zr_count = Constant <value_ints = [2]> ()";
  text << "H_zr = Mul (H, zr_count)";
  text << "zr_h = Concat <axis = 0> (H_zr, H)";
  const bool reset_bias = attrs.linear_before_reset && ctx.hasInput(3);
  for (int d = 0; d < attrs.num_directions(); ++d) {
    const std::string s = "_" + std::to_string(d);
    const auto& acts = attrs.activations[d];
    text << "dir" + s + " = Constant <value_int = " + std::to_string(d) + "> ()";
    text << "W" + s + " = Gather <axis = 0> (W, dir" + s + ")";
    text << "W_t" + s + " = Transpose (W" + s + ")";
    text << "R" + s + " = Gather <axis = 0> (R, dir" + s + ")";
    text << "R_t" + s + " = Transpose (R" + s + ")";
    ScanParts parts;
    parts.states.push_back({InitialState(text, ctx.hasInput(5), "h0_all", "h0", d), "h", "h_new"});
    BodyText step(text.elem_type());
    step.BodyConstants(attrs);
    // The gates z, r (activation f) apart from h (activation g); X·Wᵀ + Wb + Rb before the Scan,
    // without Rbh when linear_before_reset is 1 (it is added to Ht-1·Rhᵀ inside the step).
    text << "W_zr_t" + s + ", W_h_t" + s + " = Split <axis = -1> (W_t" + s + ", zr_h)";
    text << "R_zr_t" + s + ", R_h_t" + s + " = Split <axis = -1> (R_t" + s + ", zr_h)";
    std::string xw_zr = "xw_zr" + s, xw_h = "xw_h" + s;
    text << xw_zr + " = MatMul (x, W_zr_t" + s + ")";
    text << xw_h + " = MatMul (x, W_h_t" + s + ")";
    if (ctx.hasInput(3)) {
      text << "B" + s + " = Gather <axis = 0> (B, dir" + s + ")";
      text << "Wb" + s + ", Rb" + s + " = Split <axis = 0, num_outputs = 2> (B" + s + ")";
      text << "Wb_zr" + s + ", Wb_h" + s + " = Split <axis = 0> (Wb" + s + ", zr_h)";
      text << "Rb_zr" + s + ", Rb_h" + s + " = Split <axis = 0> (Rb" + s + ", zr_h)";
      text << "b_zr" + s + " = Add (Wb_zr" + s + ", Rb_zr" + s + ")";
      text << "xw_zr_b" + s + " = Add (" + xw_zr + ", b_zr" + s + ")";
      if (attrs.linear_before_reset) {
        text << "xw_h_b" + s + " = Add (" + xw_h + ", Wb_h" + s + ")";
      } else {
        text << "b_h" + s + " = Add (Wb_h" + s + ", Rb_h" + s + ")";
        text << "xw_h_b" + s + " = Add (" + xw_h + ", b_h" + s + ")";
      }
      xw_zr = "xw_zr_b" + s;
      xw_h = "xw_h_b" + s;
    }
    parts.pass_through.push_back({"R_zr_t" + s, "R_zr_t", 2});
    parts.pass_through.push_back({"R_h_t" + s, "R_h_t", 2});
    if (reset_bias)
      parts.pass_through.push_back({"Rb_h" + s, "Rb_h", 1});
    parts.scan_inputs = {{xw_zr, "xw_zr_t"}, {xw_h, "xw_h_t"}};

    step << "h_r_zr = MatMul (h_prev, R_zr_t)";
    step << "x_zr = Add (xw_zr_t, h_r_zr)";
    step.Apply(acts[0], step.Clip(attrs, "x_zr"), "zr");
    step << "z, r = Split <axis = -1, num_outputs = 2> (zr)";
    if (attrs.linear_before_reset) {
      step << (reset_bias ? "h_r_h_nb" : "h_r_h") + std::string(" = MatMul (h_prev, R_h_t)");
      if (reset_bias)
        step << "h_r_h = Add (h_r_h_nb, Rb_h)";
      step << "r_h = Mul (r, h_r_h)";
      step << "x_h = Add (xw_h_t, r_h)";
    } else {
      step << "r_h = Mul (r, h_prev)";
      step << "r_h_r = MatMul (r_h, R_h_t)";
      step << "x_h = Add (xw_h_t, r_h_r)";
    }
    step.Apply(acts[1], step.Clip(attrs, "x_h"), "candidate");
    // (1 - z) ⊙ candidate + z ⊙ Ht-1 as written (rearranged, it differs at overflow)
    step.Scalar("one", 1.0f);
    step << "one_minus_z = Sub (one, z)";
    step << "keep = Mul (one_minus_z, candidate)";
    step << "z_h = Mul (z, h_prev)";
    step << "h_new = Add (keep, z_h)";
    AddDirectionScan(text, attrs, d, masked, ctx.hasInput(5), parts, step);
  }
  AddEpilogue(text, attrs, false);

  FunctionBuilder builder(functionProto);
  builder.AddOpset("", kBodyOpset);
  builder.Add(GuardEmpty(text, attrs, false, ctx.hasInput(5), false).c_str());
  schema.BuildFunction(functionProto);
  return true;
}
} // namespace

ONNX_PREVIEW_OPERATOR_SET_SCHEMA(
    MaskedGRU,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, GRU)>()
        .FillUsing(masked_rnn::MaskedRNNDocGenerator("GRU", "H't", "Ht-1", "Ht", "Y_h", "initial_h", 6))
        .SetContextDependentFunctionBodyBuilder(BuildMaskedGRUFunctionBody, 1));

} // namespace ONNX_NAMESPACE
