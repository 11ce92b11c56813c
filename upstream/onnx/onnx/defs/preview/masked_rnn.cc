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

bool BuildMaskedRNNFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto) {
  const TypeProto* x_type = ctx.getInputType(0);
  if (x_type == nullptr || !x_type->has_tensor_type() || ElemTypeName(x_type->tensor_type().elem_type()).empty())
    return false;
  MaskedRNNAttributes attrs;
  if (!ReadAttributes(ctx, {"Tanh"}, attrs))
    return false;
  BodyText text(x_type->tensor_type().elem_type());
  const bool masked = AddPrologue(text, ctx, attrs, 4, 5, -1, 6);
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
    std::string xw = "xw" + s;
    text << xw + " = MatMul (x, W_t" + s + ")";
    if (ctx.hasInput(3)) {
      text << "B" + s + " = Gather <axis = 0> (B, dir" + s + ")";
      text << "Wb" + s + ", Rb" + s + " = Split <axis = 0, num_outputs = 2> (B" + s + ")";
      text << "b" + s + " = Add (Wb" + s + ", Rb" + s + ")";
      text << "xw_b" + s + " = Add (" + xw + ", b" + s + ")";
      xw = "xw_b" + s;
    }
    parts.pass_through.push_back({"R_t" + s, "R_t", 2});
    parts.scan_inputs = {{xw, "xw_t"}};
    step << "h_r = MatMul (h_prev, R_t)";
    step << "x_h = Add (xw_t, h_r)";
    step.Apply(acts[0], step.Clip(attrs, "x_h"), "h_new");
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
    MaskedRNN,
    1,
    GetOpSchema<ONNX_OPERATOR_SET_SCHEMA_CLASS_NAME(Onnx, 22, RNN)>()
        .FillUsing(masked_rnn::MaskedRNNDocGenerator("RNN", "H't", "Ht-1", "Ht", "Y_h", "initial_h", 6))
        .SetContextDependentFunctionBodyBuilder(BuildMaskedRNNFunctionBody, 1));

} // namespace ONNX_NAMESPACE
