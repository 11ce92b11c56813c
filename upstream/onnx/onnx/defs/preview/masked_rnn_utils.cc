// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

#include "onnx/defs/preview/masked_rnn_utils.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <limits>
#include <sstream>

#include "onnx/defs/doc_strings.h"

namespace ONNX_NAMESPACE {
namespace masked_rnn {

namespace {

constexpr const char* kMaskedRNNDocIntro = R"DOC(
Computes a one-layer {Op} over sequences whose steps may be masked anywhere, not only at the end.
It is {Op}-22 (the same inputs in the same positions, attributes, defaults, outputs and cell
equations, restated below) with one more optional input, `mask`, and one more attribute,
`masked_output`. A masked step leaves the state unchanged, its input reaches no output, and `Y`
at that step is zero (`masked_output = "zero"`, the default) or repeats the previous output of
the same direction (`masked_output = "carry"`, the behaviour of Keras masking).

With `mask` absent and `masked_output = "zero"`, Masked{Op} computes exactly what {Op}-22 computes for
`sequence_lens` (zeros in `Y` at steps at or beyond a sequence's length).

{Op}-22:
)DOC";

constexpr const char* kMaskedRNNDocMasking = R"DOC(
Masking (per direction and batch row; steps in processing order: t = 0 .. seq_length-1 for
forward, seq_length-1 .. 0 for reverse; "previous" means previously processed):

* mt = mask[t] AND t < sequence_lens  (an absent `mask` or `sequence_lens` is all true; `mask`
  has the shape of the first two axes of X, `[seq_length, batch_size]` if `layout` is 0 and
  `[batch_size, seq_length]` if `layout` is 1)
* {New} = the equations above applied to Xt and {Prev}
* {State} = mt ? {New} : {Prev}
* Yt = mt ? H't : (`masked_output = "zero"`: 0 | `masked_output = "carry"`: the previous Yt of
  this direction, 0 before the first step with mt true)
* {Finals} = the state after the last step: {Initials} (0 if not specified) for a row without
  any step with mt true.

Outputs of the reverse direction are time-aligned: Yt belongs to input step t. A value of X at a
masked step reaches no output (not even as NaN). `sequence_lens` must lie in [0, seq_length].

Activation functions take `activation_alpha` and `activation_beta` in the order of
`activations`, one value for each function that has that parameter (alpha: Affine, LeakyRelu,
ThresholdedRelu, ScaledTanh, HardSigmoid, Elu; beta: Affine, ScaledTanh, HardSigmoid). A function
whose value is not given takes its default: that of the ONNX operator of the same name
(LeakyRelu 0.01, ThresholdedRelu 1.0, HardSigmoid 0.2 and 0.5, Elu 1.0); Affine(x) =
alpha * x + beta takes 1.0 and 0.0, ScaledTanh(x) = alpha * Tanh(beta * x) takes 1.0 and 1.0.
ThresholdedRelu(x) is x for x > alpha, else 0, as the ThresholdedRelu operator defines it (the list
of {Op}-22 above writes x >= alpha).
)DOC";

std::string ReplaceAllCopy(std::string text, const char* from, const std::string& to) {
  ReplaceAll(text, from, to.c_str());
  return text;
}

struct ActivationInfo {
  const char* name;
  bool takes_alpha;
  bool takes_beta;
  float default_alpha;
  float default_beta;
};

constexpr ActivationInfo kActivations[] = {
    {"Relu", false, false, 0.0f, 0.0f},
    {"Tanh", false, false, 0.0f, 0.0f},
    {"Sigmoid", false, false, 0.0f, 0.0f},
    {"Affine", true, true, 1.0f, 0.0f},
    {"LeakyRelu", true, false, 0.01f, 0.0f},
    {"ThresholdedRelu", true, false, 1.0f, 0.0f},
    {"ScaledTanh", true, true, 1.0f, 1.0f},
    {"HardSigmoid", true, true, 0.2f, 0.5f},
    {"Elu", true, false, 1.0f, 0.0f},
    {"Softsign", false, false, 0.0f, 0.0f},
    {"Softplus", false, false, 0.0f, 0.0f},
};

const ActivationInfo* FindActivation(const std::string& name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const auto& info : kActivations) {
    std::string candidate(info.name);
    std::transform(
        candidate.begin(), candidate.end(), candidate.begin(), [](unsigned char c) { return std::tolower(c); });
    if (candidate == lower)
      return &info;
  }
  return nullptr;
}

// LSTM-22's, GRU-22's or RNN-22's shape inference, the `masked_output` value and the mask's shape.
std::function<void(InferenceContext&)> MaskedRNNShapeInference(int mask_index) {
  return [mask_index](InferenceContext& ctx) {
    const auto masked_output = getAttribute(ctx, "masked_output", "zero");
    if (masked_output != "zero" && masked_output != "carry")
      fail_type_inference("Attribute masked_output must be one of \"zero\", \"carry\"; got \"", masked_output, "\".");
    RNNShapeInference(ctx);
    if (!ctx.hasInput(mask_index))
      return;
    // mask has the shape of the first two axes of X: [seq_length, batch_size] (layout 0) or
    // [batch_size, seq_length] (layout 1).
    if (!hasInputShape(ctx, mask_index))
      return;
    const auto& mask_shape = getInputShape(ctx, mask_index);
    if (mask_shape.dim_size() != 2)
      fail_shape_inference(
          "Input mask must have rank 2 (the first two axes of X), got rank ", mask_shape.dim_size(), ".");
    if (!hasInputShape(ctx, 0) || getInputShape(ctx, 0).dim_size() < 2)
      return;
    const auto& x_shape = getInputShape(ctx, 0);
    for (int i = 0; i < 2; ++i) {
      const auto& m = mask_shape.dim(i);
      const auto& x = x_shape.dim(i);
      if (m.has_dim_value() && x.has_dim_value() && m.dim_value() != x.dim_value())
        fail_shape_inference(
            "Input mask must have the shape of the first two axes of X (",
            getAttribute(ctx, "layout", 0) == 0 ? "[seq_length, batch_size]" : "[batch_size, seq_length]",
            "): its dimension ",
            i,
            " is ",
            m.dim_value(),
            ", X's is ",
            x.dim_value(),
            ".");
    }
  };
}

} // namespace

std::string FormatFloat(float value) {
  std::ostringstream out;
  out << std::setprecision(std::numeric_limits<float>::max_digits10) << value;
  std::string text = out.str();
  if (text.find_first_of(".eE") == std::string::npos && text.find_first_of("ni") == std::string::npos)
    text += ".0"; // the parser reads a float literal only with a decimal point or an exponent
  return text;
}

bool ReadAttributes(
    const FunctionBodyBuildContext& ctx,
    const std::vector<std::string>& default_activations,
    MaskedRNNAttributes& attrs) {
  if (const auto* attr = ctx.getAttribute("direction"))
    attrs.direction = attr->s();
  if (attrs.direction != "forward" && attrs.direction != "reverse" && attrs.direction != "bidirectional")
    return false;
  if (const auto* attr = ctx.getAttribute("layout"))
    attrs.layout = attr->i();
  if (attrs.layout != 0 && attrs.layout != 1)
    return false;
  if (const auto* attr = ctx.getAttribute("masked_output"))
    attrs.masked_output = attr->s();
  if (attrs.masked_output != "zero" && attrs.masked_output != "carry")
    return false;
  if (const auto* attr = ctx.getAttribute("clip")) {
    attrs.has_clip = true;
    attrs.clip = attr->f();
  }
  if (const auto* attr = ctx.getAttribute("input_forget"))
    attrs.input_forget = attr->i();
  if (const auto* attr = ctx.getAttribute("linear_before_reset"))
    attrs.linear_before_reset = attr->i();

  const size_t per_direction = default_activations.size();
  const size_t expected = per_direction * attrs.num_directions();
  std::vector<std::string> names;
  if (const auto* attr = ctx.getAttribute("activations")) {
    names.assign(attr->strings().begin(), attr->strings().end());
  } else {
    for (int d = 0; d < attrs.num_directions(); ++d)
      names.insert(names.end(), default_activations.begin(), default_activations.end());
  }
  // RNN-22 declares the default ["Tanh", "Tanh"] for every direction: a forward or reverse RNN may
  // list two functions and uses the first.
  const bool rnn_pair = per_direction == 1 && attrs.num_directions() == 1 && names.size() == 2;
  if (names.size() != expected && !rnn_pair)
    return false;
  std::vector<float> alphas, betas;
  if (const auto* attr = ctx.getAttribute("activation_alpha"))
    alphas.assign(attr->floats().begin(), attr->floats().end());
  if (const auto* attr = ctx.getAttribute("activation_beta"))
    betas.assign(attr->floats().begin(), attr->floats().end());
  size_t next_alpha = 0, next_beta = 0;
  std::vector<Activation> resolved;
  for (const auto& name : names) {
    const ActivationInfo* info = FindActivation(name);
    if (info == nullptr)
      return false;
    Activation act{info->name, info->default_alpha, info->default_beta};
    if (info->takes_alpha && next_alpha < alphas.size())
      act.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size())
      act.beta = betas[next_beta++];
    resolved.push_back(act);
  }
  for (int d = 0; d < attrs.num_directions(); ++d)
    attrs.activations.emplace_back(resolved.begin() + d * per_direction, resolved.begin() + (d + 1) * per_direction);
  return true;
}

std::string ElemTypeName(int32_t elem_type) {
  switch (elem_type) {
    case TensorProto_DataType_FLOAT:
      return "float";
    case TensorProto_DataType_DOUBLE:
      return "double";
    case TensorProto_DataType_FLOAT16:
      return "float16";
    case TensorProto_DataType_BFLOAT16:
      return "bfloat16";
    default:
      return "";
  }
}

void AddDirectionScan(
    BodyText& text,
    const MaskedRNNAttributes& attrs,
    int d,
    bool masked,
    bool has_initial_h,
    const ScanParts& parts,
    const BodyText& step) {
  const std::string s = "_" + std::to_string(d);
  const bool carry_y = masked && attrs.masked_output == "carry" && has_initial_h;
  const int r = attrs.reverse(d) ? 1 : 0;

  std::string body_inputs, body_outputs, scan_inputs, scan_outputs, tail;
  auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
  for (const auto& st : parts.states) {
    add(body_inputs, text.Param(st[1] + "_prev", 2));
    add(body_outputs, text.Param(st[1] + "_next", 2));
    add(scan_inputs, st[0]);
    add(scan_outputs, st[1] + "_last" + s);
  }
  if (carry_y) {
    text << "y_shape" + s + " = Shape (" + parts.states[0][0] + ")";
    text << "y_zeros" + s + " = ConstantOfShape (y_shape" + s + ")";
    text << "y_initial" + s + " = CastLike (y_zeros" + s + ", " + parts.states[0][0] + ")";
    add(body_inputs, text.Param("y_prev", 2));
    add(body_outputs, text.Param("y_next", 2));
    add(scan_inputs, "y_initial" + s);
    add(scan_outputs, "y_last" + s);
  }
  for (const auto& p : parts.pass_through) {
    add(body_inputs, text.Param(p.inner, p.rank));
    add(body_outputs, text.Param(p.inner + "_next", p.rank));
    add(scan_inputs, p.outer);
    add(scan_outputs, p.inner + "_last" + s);
    tail += p.inner + "_next = Identity (" + p.inner + ")\n";
  }
  std::string directions;
  for (const auto& in : parts.scan_inputs) {
    add(body_inputs, text.Param(in.second, 2));
    add(scan_inputs, in.first);
    add(directions, std::to_string(r));
  }
  if (masked) {
    add(body_inputs, text.Param("m_t", 2, "bool"));
    add(scan_inputs, "m");
    add(directions, std::to_string(r));
  }
  add(body_outputs, text.Param("y_t", 3));
  add(scan_outputs, "Y" + s);

  std::string body = step.str();
  std::string y;
  if (!masked) {
    for (const auto& st : parts.states)
      body += st[1] + "_next = Identity (" + st[2] + ")\n";
    y = "h_new";
  } else {
    for (const auto& st : parts.states)
      body += st[1] + "_next = Where (m_t, " + st[2] + ", " + st[1] + "_prev)\n";
    if (attrs.masked_output == "zero") {
      body += "zero_f = Constant <value_float = 0.0> ()\n";
      body += "zero = Cast <to = " + std::to_string(text.elem_type()) + "> (zero_f)\n";
      body += "y = Where (m_t, h_new, zero)\n";
      y = "y";
    } else if (carry_y) {
      body += "y_next = Where (m_t, h_new, y_prev)\n";
      y = "y_next";
    } else { // "carry" from a zero initial h: the state is the previous output
      y = "h_next";
    }
  }
  // The scan output is a value of its own: a body output that is both a state and a scan output is
  // miscomputed by some runtimes (onnxruntime 1.32).
  body += "y_t = Unsqueeze (" + y + ", y_axis)\n";
  body += tail;

  text << scan_outputs + " = Scan <num_scan_inputs = " + std::to_string(parts.scan_inputs.size() + (masked ? 1 : 0)) +
          ", scan_input_directions = [" + directions + "], scan_output_directions = [" + std::to_string(r) +
          "], body = step" + s + " (" + body_inputs + ") => (" + body_outputs + ") {\n" +
          "y_axis = Constant <value_ints = [0]> ()\n" + body + "}> (" + scan_inputs + ")";
  for (size_t i = 0; i < parts.states.size(); ++i) {
    const std::string out = i == 0 ? "Y_h" : "Y_c";
    text << out + s + " = Unsqueeze (" + parts.states[i][1] + "_last" + s + ", axis_0)";
  }
}

bool AddPrologue(
    BodyText& text,
    const FunctionBodyBuildContext& ctx,
    const MaskedRNNAttributes& attrs,
    int sequence_lens_index,
    int initial_h_index,
    int initial_c_index,
    int mask_index) {
  text << "axis_0 = Constant <value_ints = [0]> ()";
  text << "axis_1 = Constant <value_ints = [1]> ()";
  text << "axis_2 = Constant <value_ints = [2]> ()";
  text << "H = Shape <start = 2> (R)";
  if (attrs.layout == 1) {
    text << "x = Transpose <perm = [1, 0, 2]> (X)";
    if (ctx.hasInput(initial_h_index))
      text << "h0_all = Transpose <perm = [1, 0, 2]> (initial_h)";
    if (initial_c_index >= 0 && ctx.hasInput(initial_c_index))
      text << "c0_all = Transpose <perm = [1, 0, 2]> (initial_c)";
  } else {
    text << "x = Identity (X)";
    if (ctx.hasInput(initial_h_index))
      text << "h0_all = Identity (initial_h)";
    if (initial_c_index >= 0 && ctx.hasInput(initial_c_index))
      text << "c0_all = Identity (initial_c)";
  }
  const bool has_mask = ctx.hasInput(mask_index);
  const bool has_lens = ctx.hasInput(sequence_lens_index);
  std::string m_tn; // the effective mask, time-major [T, N]
  if (has_mask) {
    // mask must have exactly the shape of X's first two axes: concatenated with a tensor of that
    // shape along a new axis, it fails at run time otherwise (no silent broadcast).
    text << "XTN = Shape <start = 0, end = 2> (X)";
    text << "like_x = ConstantOfShape <value = bool[1] {1}> (XTN)";
    text << "mask_0 = Unsqueeze (mask, axis_0)";
    text << "like_x_0 = Unsqueeze (like_x, axis_0)";
    text << "checked = Concat <axis = 0> (mask_0, like_x_0)";
    text << "mask_index = Constant <value_int = 0> ()";
    text << "mask_checked = Gather <axis = 0> (checked, mask_index)";
    if (attrs.layout == 1)
      text << "mask_tn = Transpose <perm = [1, 0]> (mask_checked)";
    m_tn = attrs.layout == 1 ? "mask_tn" : "mask_checked";
  }
  if (has_lens) {
    text << "T = Shape <start = 0, end = 1> (x)";
    text << "T_scalar = Squeeze (T)";
    text << "t_start = Constant <value_int = 0> ()";
    text << "t_delta = Constant <value_int = 1> ()";
    text << "t = Range (t_start, T_scalar, t_delta)";
    text << "t_col = Unsqueeze (t, axis_1)";
    text << "lens = Cast <to = 7> (sequence_lens)";
    text << "lens_row = Unsqueeze (lens, axis_0)";
    text << "within = Less (t_col, lens_row)";
    if (has_mask)
      text << "m_tn = And (" + m_tn + ", within)";
    m_tn = has_mask ? "m_tn" : "within";
  }
  if (!m_tn.empty())
    text << "m = Unsqueeze (" + m_tn + ", axis_2)";
  if (!ctx.hasInput(initial_h_index) || (initial_c_index >= 0 && !ctx.hasInput(initial_c_index))) {
    text << "N = Shape <start = 1, end = 2> (x)";
    text << "NH = Concat <axis = 0> (N, H)";
    text << "zeros_f = ConstantOfShape (NH)";
    text << "zeros = CastLike (zeros_f, x)";
  }
  return !m_tn.empty();
}

void AddEpilogue(BodyText& text, const MaskedRNNAttributes& attrs, bool lstm) {
  std::vector<std::string> outputs{"Y", "Y_h"};
  if (lstm)
    outputs.push_back("Y_c");
  for (const auto& out : outputs) {
    const std::string tm = attrs.layout == 1 ? out + "_tm" : out + "_rec";
    if (attrs.num_directions() == 2)
      text << tm + " = Concat <axis = " + (out == "Y" ? "1" : "0") + "> (" + out + "_0, " + out + "_1)";
    else
      text << tm + " = Identity (" + out + "_0)";
    if (attrs.layout == 1)
      text << out + "_rec = Transpose <perm = " + (out == "Y" ? "[2, 0, 1, 3]" : "[1, 0, 2]") + "> (" + tm + ")";
  }
}

std::string GuardEmpty(
    const BodyText& recurrence,
    const MaskedRNNAttributes& attrs,
    bool lstm,
    bool has_initial_h,
    bool has_initial_c) {
  BodyText none(recurrence.elem_type());
  const int time_axis = attrs.layout == 1 ? 1 : 0, batch_axis = 1 - time_axis;
  auto axis = [](const std::string& name, int a) {
    return name + " = Shape <start = " + std::to_string(a) + ", end = " + std::to_string(a + 1) + "> (X)";
  };
  none << axis("T_none", time_axis);
  none << axis("N_none", batch_axis);
  none << "D_none = Constant <value_ints = [" + std::to_string(attrs.num_directions()) + "]> ()";
  none << "H_none = Shape <start = 2, end = 3> (R)";
  none << std::string("Y_shape = Concat <axis = 0> (") +
          (attrs.layout == 1 ? "N_none, T_none, D_none, H_none)" : "T_none, D_none, N_none, H_none)");
  none << "Y_zeros = ConstantOfShape (Y_shape)";
  none << "Y_none = CastLike (Y_zeros, X)";
  none << std::string("state_shape = Concat <axis = 0> (") +
          (attrs.layout == 1 ? "N_none, D_none, H_none)" : "D_none, N_none, H_none)");
  none << "state_zeros_f = ConstantOfShape (state_shape)";
  none << "state_zeros = CastLike (state_zeros_f, X)";
  none << std::string("Y_h_none = Identity (") + (has_initial_h ? "initial_h)" : "state_zeros)");
  std::string outputs = "Y, Y_h", none_outputs = none.Param("Y_none", 4) + ", " + none.Param("Y_h_none", 3);
  std::string rec_outputs = none.Param("Y_rec", 4) + ", " + none.Param("Y_h_rec", 3);
  if (lstm) {
    none << std::string("Y_c_none = Identity (") + (has_initial_c ? "initial_c)" : "state_zeros)");
    outputs += ", Y_c";
    none_outputs += ", " + none.Param("Y_c_none", 3);
    rec_outputs += ", " + none.Param("Y_c_rec", 3);
  }
  return "XTN_all = Shape <start = 0, end = 2> (X)\n"
         "steps = ReduceProd <keepdims = 0> (XTN_all)\n"
         "no_steps = Constant <value_int = 0> ()\n"
         "empty = Equal (steps, no_steps)\n" +
      outputs + " = If (empty) <then_branch = nothing_processed () => (" + none_outputs + ") {\n" + none.str() +
      "}, else_branch = recurrence () => (" + rec_outputs + ") {\n" + recurrence.str() + "}>\n";
}

std::string InitialState(BodyText& text, bool present, const std::string& all, const std::string& name, int d) {
  if (!present)
    return "zeros";
  const std::string s = "_" + std::to_string(d);
  text << name + s + " = Gather <axis = 0> (" + all + ", dir" + s + ")";
  return name + s;
}

std::function<void(OpSchema&)> MaskedRNNDocGenerator(
    const char* op,
    const char* new_state,
    const char* prev_state,
    const char* state,
    const char* finals,
    const char* initials,
    int mask_index) {
  return [=](OpSchema& schema) {
    std::string doc = ReplaceAllCopy(kMaskedRNNDocIntro, "{Op}", op);
    // The counterpart's documentation, its closing note on optional arguments moved to the end.
    std::string counterpart = schema.doc() ? schema.doc() : "";
    const std::string optional_note = GenerateOptionalArgumentsDoc();
    ReplaceAll(counterpart, optional_note.c_str(), "");
    doc += counterpart;
    std::string masking = kMaskedRNNDocMasking;
    masking = ReplaceAllCopy(masking, "{New}", new_state);
    masking = ReplaceAllCopy(masking, "{Prev}", prev_state);
    masking = ReplaceAllCopy(masking, "{State}", state);
    masking = ReplaceAllCopy(masking, "{Finals}", finals);
    masking = ReplaceAllCopy(masking, "{Initials}", initials);
    masking = ReplaceAllCopy(masking, "{Op}", op);
    doc += masking + optional_note;
    schema.SetDoc(GET_OP_DOC_STR(doc));
    schema.Attr(
        "masked_output",
        "What `Y` holds at a masked step (`mask` false or t >= `sequence_lens`): \"zero\" (default): 0; "
        "\"carry\": the previous output of the same direction, 0 before the first processed step. "
        "Any other value is an error.",
        AttributeProto::STRING,
        std::string("zero"));
    schema.Input(
        mask_index,
        "mask",
        "Optional boolean tensor marking the steps to process: a false entry skips that step of that "
        "sequence (the state is carried across it unchanged and its input reaches no output). It has "
        "the shape of the first two axes of X: `[seq_length, batch_size]` if `layout` is 0, "
        "`[batch_size, seq_length]` if `layout` is 1. If not specified - assumed all true.",
        "T2",
        OpSchema::Optional,
        true,
        1,
        OpSchema::NonDifferentiable);
    schema.TypeConstraint("T2", {"tensor(bool)"}, "Constrain mask to boolean tensor.");
    schema.TypeAndShapeInferenceFunction(MaskedRNNShapeInference(mask_index));
    schema.SetSupportLevel(OpSchema::SupportType::EXPERIMENTAL);
  };
}

} // namespace masked_rnn
} // namespace ONNX_NAMESPACE
