// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

#include "onnx/defs/preview/masked_rnn_utils.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <iomanip>
#include <limits>
#include <sstream>

#include "onnx/defs/doc_strings.h"
#include "onnx/defs/tensor_proto_util.h"

namespace ONNX_NAMESPACE {
namespace masked_rnn {

namespace {

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

constexpr const char* kOptionalArgumentsNote = "This operator has **optional** inputs/outputs.";
constexpr const char* kOnnxThresholdedRelu = "ThresholdedRelu(x)     - x if x >= alpha else 0";
constexpr const char* kThresholdedRelu = "ThresholdedRelu(x)     - x if x > alpha else 0";

std::string Strip(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n\r");
  if (first == std::string::npos)
    return "";
  return text.substr(first, text.find_last_not_of(" \t\n\r") - first + 1);
}

// BEGIN GENERATED doc by scripts/generate_upstream_doc.py from onnx_masked_rnn/schema_doc.py; do not edit
constexpr const char* kDocTail = R"DOC(
Each activation function is the ONNX operator of the same name; Affine(x) = alpha*x + beta and
ScaledTanh(x) = alpha*Tanh(beta*x). Walking `activations` in order, each function that takes alpha
consumes the next unused value of `activation_alpha`, each that takes beta the next unused value of
`activation_beta`, and a function that does not take a parameter consumes none; a function that
finds the list exhausted takes its default (alpha: Affine 1, LeakyRelu 0.01, ThresholdedRelu 1,
ScaledTanh 1, HardSigmoid 0.2, Elu 1; beta: Affine 0, ScaledTanh 1, HardSigmoid 0.5: the ONNX
operators' defaults, and for Affine and ScaledTanh those of this specification). Values that no
function consumes are an error. Names are matched without regard to letter case.

{cell}

Masking (per direction, steps in processing order: t = 0 .. seq_length-1 forward,
seq_length-1 .. 0 reverse; "previous" means previously processed):

* mt = mask[t] AND t < sequence_lens       (an absent mask or sequence_lens is all true)
* {new} = the cell equations applied to Xt and {prev}
* {state} = mt ? {new} : {prev}
* Yt = mt ? H't : (zero: 0 | carry: the previous Y of this direction, 0 before the first
  processed step)
* {finals} = the state after the last step: {initials} (0 if absent) for a row with no
  processed step, including every row when seq_length is 0.

`a ? b : c` selects per row: a value of X at a skipped step reaches no output, and NaN or Inf
there changes no output. Outputs are time-aligned in every direction: Yt belongs to input step t,
and the reverse direction of a row starts at its last processed step.

Empty inputs:

batch_size 0 and seq_length 0 are valid, not errors. With batch_size 0 every output is empty.
With seq_length 0, Y is empty and {finals} is {initials} (0 if absent); `sequence_lens`,
if given, is then all 0.

Element types:

The float inputs and the outputs share one type T; `sequence_lens` is int32 and `mask` is bool.
The float attributes hold float32 values. In float and double the result is that of the equations
in that type, up to rounding; in float16 and bfloat16 an implementation may compute in the type or
in a wider one, and round the outputs to T.

Errors:

Shape inference rejects a node with any of these, each decidable from attributes, element types,
known dimensions and constant inputs:

{static_errors}

At run time an implementation rejects what shape inference could not see: the same shape
conditions on the actual tensors, and `sequence_lens` values outside [0, seq_length]. The
function body rejects at run time a `mask` that is not the shape of the first two axes of X (it
concatenates `mask` with a tensor of that shape); it checks no other run-time condition, and for
inputs that violate one what it computes is undefined.
)DOC";
constexpr const char* kMaskDoc = R"DOC(
Optional boolean tensor marking the steps to process; a false entry skips that step of that row: the state is carried across it unchanged, its value of `X` reaches no output, and `Y` at that step is set by `masked_output`. It has the shape of the first two axes of `X`: `[seq_length, batch_size]` if `layout` is 0, `[batch_size, seq_length]` if 1. If not specified - assumed all true.
)DOC";
// END GENERATED doc

// The masked operator's doc string: `head`, the counterpart's notation, activation list and
// equations (ThresholdedRelu with the operator's `>`), `tail`, the note on optional arguments.
// onnx_masked_rnn.schema_doc.doc composes the same text.
std::string ComposeDoc(const MaskedOp& op, const std::string& counterpart_doc) {
  const std::string onnx_doc = Strip(counterpart_doc);
  const auto notation = onnx_doc.find("Notations:");
  const auto note = onnx_doc.find(kOptionalArgumentsNote);
  if (notation == std::string::npos || note == std::string::npos || note < notation)
    return onnx_doc; // built without doc strings
  std::string restated = onnx_doc.substr(notation, note - notation);
  restated = restated.substr(0, restated.find_last_not_of(" \t\n\r") + 1);
  ReplaceAll(restated, kOnnxThresholdedRelu, kThresholdedRelu);
  std::string tail = Strip(kDocTail);
  const std::pair<const char*, const char*> fields[] = {
      {"{new}", op.doc.new_state},
      {"{prev}", op.doc.prev},
      {"{state}", op.doc.state},
      {"{finals}", op.doc.finals},
      {"{initials}", op.doc.initials},
      {"{cell}", op.doc.cell},
      {"{static_errors}", op.doc.static_errors}};
  for (const auto& [placeholder, value] : fields)
    ReplaceAll(tail, placeholder, Strip(value).c_str());
  return Strip(op.doc.head) + "\n\n" + restated + "\n\n" + tail + "\n\n" + Strip(onnx_doc.substr(note));
}

const char* InputName(const MaskedOp& op, size_t i) {
  static const char* const names[] = {"X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"};
  return static_cast<int>(i) == op.mask_index ? "mask" : names[i];
}

std::string TypeName(int32_t elem_type) {
  std::string name = TensorProto_DataType_Name(static_cast<TensorProto_DataType>(elem_type));
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  return "tensor(" + name + ")";
}

// A dimension's value, -1 when it is not a known number.
int64_t Value(const TensorShapeProto_Dimension& dim) {
  return dim.has_dim_value() ? dim.dim_value() : -1;
}

// The static errors of the operators' text (onnx_masked_rnn.schema_doc.STATIC_ERRORS), in its order.
class MaskedRNNChecks {
 public:
  MaskedRNNChecks(InferenceContext& ctx, const MaskedOp& op) : ctx_(ctx), op_(op) {}

  void Attributes() {
    direction_ = getAttribute(ctx_, "direction", "forward");
    if (direction_ != "forward" && direction_ != "reverse" && direction_ != "bidirectional")
      fail_shape_inference(
          "attribute 'direction' must be one of forward, reverse, bidirectional; got \"", direction_, "\".");
    num_directions_ = direction_ == "bidirectional" ? 2 : 1;
    layout_ = getAttribute(ctx_, "layout", 0);
    if (layout_ != 0 && layout_ != 1)
      fail_shape_inference("attribute 'layout' must be 0 or 1; got ", layout_, ".");
    const std::string masked_output = getAttribute(ctx_, "masked_output", "zero");
    if (masked_output != "zero" && masked_output != "carry")
      fail_shape_inference("attribute 'masked_output' must be one of zero, carry; got \"", masked_output, "\".");
    if (op_.flag != nullptr) {
      const int64_t flag = getAttribute(ctx_, op_.flag, 0);
      if (flag != 0 && flag != 1)
        fail_shape_inference("attribute '", op_.flag, "' must be 0 or 1; got ", flag, ".");
    }
    if (const auto* clip = ctx_.getAttribute("clip")) {
      if (!(clip->f() > 0.0f)) // NaN fails too
        fail_shape_inference("attribute 'clip' must be a positive number; got ", clip->f(), ".");
    }
    if (const auto* hidden_size = ctx_.getAttribute("hidden_size")) {
      if (hidden_size->i() <= 0)
        fail_shape_inference("attribute 'hidden_size' must be a positive integer; got ", hidden_size->i(), ".");
      hidden_size_ = hidden_size->i();
    }
    Activations();
  }

  void Types() {
    for (size_t i = 0; i < ctx_.getNumInputs(); ++i) {
      if (!ctx_.hasInput(i))
        continue;
      const TypeProto* type = ctx_.getInputType(i);
      if (type == nullptr || !type->has_tensor_type() || type->tensor_type().elem_type() == 0)
        continue;
      const int32_t elem_type = type->tensor_type().elem_type();
      const char* name = InputName(op_, i);
      if (i == 4 || static_cast<int>(i) == op_.mask_index) {
        const int32_t wanted = i == 4 ? TensorProto_DataType_INT32 : TensorProto_DataType_BOOL;
        if (elem_type != wanted)
          fail_type_inference("input '", name, "' must be ", TypeName(wanted), ", got ", TypeName(elem_type), ".");
        continue;
      }
      if (ElemTypeName(elem_type).empty())
        fail_type_inference(
            "input '",
            name,
            "' must be one of tensor(bfloat16), tensor(float16), tensor(float), tensor(double), got ",
            TypeName(elem_type),
            ".");
      if (float_type_ == 0) {
        float_type_ = elem_type;
        first_float_ = name;
      } else if (elem_type != float_type_) {
        fail_type_inference(
            "input '",
            name,
            "' has type ",
            TypeName(elem_type),
            ", but '",
            first_float_,
            "' has ",
            TypeName(float_type_),
            "; all float inputs must share one type.");
      }
    }
  }

  void Shapes() {
    const auto* X = Shape(0, 3);
    const auto* W = Shape(1, 3);
    const auto* R = Shape(2, 3);
    if (X != nullptr) {
      time_ = X->dim(layout_ == 1 ? 1 : 0);
      batch_ = X->dim(layout_ == 1 ? 0 : 1);
    }
    const int64_t T = Value(time_), N = Value(batch_), I = X != nullptr ? Value(X->dim(2)) : -1;
    const int64_t D = num_directions_, G = op_.num_gates;
    int64_t H = hidden_size_;
    if (R != nullptr) {
      Expect(2, R->dim(0), D, 0, "num_directions of direction");
      if (H >= 0)
        Expect(2, R->dim(2), H, 2, "hidden_size");
      else
        H = Value(R->dim(2));
      hidden_ = R->dim(2);
    }
    if (W != nullptr) {
      Expect(1, W->dim(0), D, 0, "num_directions of direction");
      Expect(1, W->dim(2), I, 2, "input_size, the last axis of X");
      if (H < 0 && W->dim(1).has_dim_value()) {
        if (W->dim(1).dim_value() % G != 0)
          fail_shape_inference(
              "input 'W' has size ", W->dim(1).dim_value(), " on axis 1, not a multiple of ", G, " gates.");
        H = W->dim(1).dim_value() / G;
      }
    }
    const int64_t GH = H >= 0 ? G * H : -1;
    if (W != nullptr)
      Expect(1, W->dim(1), GH, 1, "gates x hidden_size");
    if (R != nullptr)
      Expect(2, R->dim(1), GH, 1, "gates x hidden_size");
    if (const auto* B = Shape(3, 2)) {
      Expect(3, B->dim(0), D, 0, "num_directions");
      Expect(3, B->dim(1), GH >= 0 ? 2 * GH : -1, 1, "2 x gates x hidden_size");
    }
    if (const auto* lens = Shape(4, 1))
      Expect(4, lens->dim(0), N, 0, "batch_size");
    const int64_t state[3] = {layout_ == 1 ? N : D, layout_ == 1 ? D : N, H};
    const char* state_what[3] = {
        layout_ == 1 ? "batch_size" : "num_directions", layout_ == 1 ? "num_directions" : "batch_size", "hidden_size"};
    for (int i : {5, 6}) {
      if (i == 6 && !op_.lstm())
        continue; // initial_c is LSTM's
      if (const auto* s = Shape(i, 3)) {
        for (int axis = 0; axis < 3; ++axis)
          Expect(i, s->dim(axis), state[axis], axis, state_what[axis]);
      }
    }
    if (op_.lstm()) {
      if (const auto* P = Shape(7, 2)) {
        Expect(7, P->dim(0), D, 0, "num_directions");
        Expect(7, P->dim(1), H >= 0 ? 3 * H : -1, 1, "3 x hidden_size");
      }
    }
    if (const auto* mask = Shape(op_.mask_index, 2)) {
      const int64_t wanted[2] = {layout_ == 1 ? N : T, layout_ == 1 ? T : N};
      for (int axis = 0; axis < 2; ++axis) {
        const int64_t actual = Value(mask->dim(axis));
        if (actual >= 0 && wanted[axis] >= 0 && actual != wanted[axis])
          fail_shape_inference(
              "input 'mask' must have the shape of the first two axes of X ",
              layout_ == 1 ? "[batch_size, seq_length]" : "[seq_length, batch_size]",
              " = [",
              wanted[0],
              ", ",
              wanted[1],
              "], got size ",
              actual,
              " on axis ",
              axis,
              ".");
      }
    }
    hidden_value_ = H;
    SequenceLensValues(T);
  }

  // Y, Y_h (and Y_c): element type of the float inputs; shapes from X, direction and hidden_size.
  void Outputs() {
    if (float_type_ == 0)
      return;
    for (size_t i = 0; i < ctx_.getNumOutputs(); ++i) {
      if (!ctx_.hasOutput(i))
        continue;
      auto* out = ctx_.getOutputType(i)->mutable_tensor_type();
      out->set_elem_type(float_type_);
      if (!hasInputShape(ctx_, 0))
        continue;
      TensorShapeProto_Dimension D, H;
      D.set_dim_value(num_directions_);
      if (hidden_value_ >= 0)
        H.set_dim_value(hidden_value_);
      else
        H = hidden_;
      std::vector<TensorShapeProto_Dimension> dims;
      if (i == 0)
        dims = layout_ == 1 ? std::vector<TensorShapeProto_Dimension>{batch_, time_, D, H}
                            : std::vector<TensorShapeProto_Dimension>{time_, D, batch_, H};
      else
        dims = layout_ == 1 ? std::vector<TensorShapeProto_Dimension>{batch_, D, H}
                            : std::vector<TensorShapeProto_Dimension>{D, batch_, H};
      auto* shape = out->mutable_shape();
      shape->clear_dim();
      for (const auto& dim : dims)
        *shape->add_dim() = dim;
    }
  }

 private:
  void Activations() {
    const size_t expected = static_cast<size_t>(op_.num_activations * num_directions_);
    std::vector<std::string> names;
    if (const auto* attr = ctx_.getAttribute("activations")) {
      names.assign(attr->strings().begin(), attr->strings().end());
      // RNN-22's default lists two functions for any direction: a forward or reverse RNN may too.
      const bool rnn_pair = op_.num_activations == 1 && num_directions_ == 1 && names.size() == 2;
      if (names.size() != expected && !rnn_pair)
        fail_shape_inference(
            "attribute 'activations' must list ",
            expected,
            " functions (",
            op_.num_activations,
            " per direction times num_directions ",
            num_directions_,
            "), got ",
            names.size(),
            ".");
    }
    size_t takes_alpha = 0, takes_beta = 0;
    for (const auto& name : names) {
      const ActivationInfo* info = FindActivation(name);
      if (info == nullptr)
        fail_shape_inference(
            "attribute 'activations' names \"",
            name,
            "\", which is not one of Relu, Tanh, Sigmoid, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
            "HardSigmoid, Elu, Softsign, Softplus.");
      takes_alpha += info->takes_alpha;
      takes_beta += info->takes_beta;
    }
    // The default functions take no parameter.
    const std::array<std::pair<const char*, size_t>, 2> consumed = {
        std::pair<const char*, size_t>{"activation_alpha", takes_alpha}, {"activation_beta", takes_beta}};
    for (const auto& [attribute, taken] : consumed) {
      const auto* attr = ctx_.getAttribute(attribute);
      if (attr != nullptr && static_cast<size_t>(attr->floats_size()) > taken)
        fail_shape_inference(
            "attribute '",
            attribute,
            "' has ",
            attr->floats_size(),
            " values, but the activation functions consume ",
            taken,
            ": values that no function consumes are an error.");
    }
  }

  // Input `i`'s shape if known, after checking its rank; nullptr if absent or unknown.
  const TensorShapeProto* Shape(size_t i, int rank) {
    if (i >= ctx_.getNumInputs() || !ctx_.hasInput(i) || !hasInputShape(ctx_, i))
      return nullptr;
    const auto& shape = getInputShape(ctx_, i);
    if (shape.dim_size() != rank)
      fail_shape_inference(
          "input '", InputName(op_, i), "' must have rank ", rank, ", got rank ", shape.dim_size(), ".");
    return &shape;
  }

  void Expect(size_t i, const TensorShapeProto_Dimension& actual, int64_t wanted, int axis, const char* what) {
    if (actual.has_dim_value() && wanted >= 0 && actual.dim_value() != wanted)
      fail_shape_inference(
          "input '",
          InputName(op_, i),
          "' has size ",
          actual.dim_value(),
          " on axis ",
          axis,
          ", expected ",
          wanted,
          " (",
          what,
          ").");
  }

  // A constant sequence_lens (an initializer or a Constant's output) against a known seq_length.
  void SequenceLensValues(int64_t T) {
    if (T < 0 || ctx_.getNumInputs() <= 4 || !ctx_.hasInput(4))
      return;
    const TensorProto* data = ctx_.getInputData(4);
    if (data == nullptr || data->data_type() != TensorProto_DataType_INT32)
      return;
    for (int32_t value : ParseData<int32_t>(data)) {
      if (value < 0 || value > T)
        fail_shape_inference("input 'sequence_lens' must lie in [0, seq_length=", T, "], got ", value, ".");
    }
  }

  InferenceContext& ctx_;
  const MaskedOp& op_;
  std::string direction_;
  int64_t num_directions_ = 1;
  int64_t layout_ = 0;
  int64_t hidden_size_ = -1;
  int64_t hidden_value_ = -1;
  int32_t float_type_ = 0;
  const char* first_float_ = "";
  TensorShapeProto_Dimension time_, batch_, hidden_;
};

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
  const std::string r = attrs.reverse(d) ? "1" : "0";

  std::string body_inputs, body_outputs, scan_inputs, scan_outputs, directions;
  auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
  for (const auto& st : parts.states) {
    add(body_inputs, text.Param(st[1] + "_prev", 2));
    add(body_outputs, text.Param(st[1] + "_next", 2));
    add(scan_inputs, st[0]);
    add(scan_outputs, st[1] + "_last" + s);
  }
  if (carry_y) {
    text.AddFor(
        d,
        R"ONNX(
          y_shape{d} = Shape ({h0})
          y_zeros{d} = ConstantOfShape (y_shape{d})
          y_initial{d} = CastLike (y_zeros{d}, {h0})
        )ONNX",
        {{"h0", parts.states[0][0]}});
    add(body_inputs, text.Param("y_prev", 2));
    add(body_outputs, text.Param("y_next", 2));
    add(scan_inputs, "y_initial" + s);
    add(scan_outputs, "y_last" + s);
  }
  BodyText passed(text.elem_type());
  for (const auto& p : parts.pass_through) {
    add(body_inputs, text.Param(p.inner, p.rank));
    add(body_outputs, text.Param(p.inner + "_next", p.rank));
    add(scan_inputs, p.outer);
    add(scan_outputs, p.inner + "_last" + s);
    passed.Add(p.inner + "_next = Identity (" + p.inner + ")");
  }
  for (const auto& in : parts.scan_inputs) {
    add(body_inputs, text.Param(in.second, 2));
    add(scan_inputs, in.first);
    add(directions, r);
  }
  if (masked) {
    add(body_inputs, text.Param("m_t", 2, "bool"));
    add(scan_inputs, "m");
    add(directions, r);
  }
  add(body_outputs, text.Param("y_t", 3));
  add(scan_outputs, "Y" + s);

  // Per step, with m_t the step's effective mask: a masked step leaves the state untouched, and
  // y is 0 ("zero") or the previous output ("carry"); the package's masked_scan writes the same.
  BodyText body(text.elem_type());
  body.Add(step.str());
  std::string y = "h_new";
  for (const auto& st : parts.states)
    body.Add(
        masked ? "{s}_next = Where (m_t, {new}, {s}_prev)" : "{s}_next = Identity ({new})",
        {{"s", st[1]}, {"new", st[2]}});
  if (masked && attrs.masked_output == "zero") {
    body.Scalar("zero", 0.0f);
    body.Add("y = Where (m_t, h_new, zero)");
    y = "y";
  } else if (carry_y) {
    body.Add("y_next = Where (m_t, h_new, y_prev)");
    y = "y_next";
  } else if (masked) { // "carry" from a zero initial h: the state is the previous output
    y = "h_next";
  }
  // The scan output is a value of its own: a body output that is both a state and a scan output is
  // miscomputed by some runtimes (onnxruntime 1.32).
  body.Add(
      R"ONNX(
    y_axis = Constant <value = int64[1] {0}> ()
    y_t = Unsqueeze ({y}, y_axis)
  )ONNX",
      {{"y", y}});
  body.Add(passed.str());

  text.Add(
      "{outputs} = Scan <num_scan_inputs = {count}, scan_input_directions = [{directions}], "
      "scan_output_directions = [{r}], body = step{s} ({inputs}) => ({body_outputs}) {\n{body}}> ({scan_inputs})",
      {{"outputs", scan_outputs},
       {"count", std::to_string(parts.scan_inputs.size() + (masked ? 1 : 0))},
       {"directions", directions},
       {"r", r},
       {"s", s},
       {"inputs", body_inputs},
       {"body_outputs", body_outputs},
       {"body", body.str()},
       {"scan_inputs", scan_inputs}});
  for (size_t i = 0; i < parts.states.size(); ++i)
    text.AddFor(
        d, "{out}{d} = Unsqueeze ({s}_last{d}, axis_0)", {{"out", i == 0 ? "Y_h" : "Y_c"}, {"s", parts.states[i][1]}});
}

bool AddPrologue(
    BodyText& text,
    const FunctionBodyBuildContext& ctx,
    MaskedRNNAttributes& attrs,
    int sequence_lens_index,
    int initial_h_index,
    int initial_c_index,
    int mask_index) {
  // onnxruntime 1.32 (graph optimizations on) crashes at session creation on a float16 MatMul fed
  // by a Transpose of its input (MatmulTransposeFusion): batch-major float16 X is projected as it
  // is and the projections are made time-major instead (TimeMajor), as the package's bodies do.
  attrs.project_batch_major = attrs.layout == 1 && text.elem_type() == TensorProto_DataType_FLOAT16;
  const std::string time_axis = attrs.layout == 1 ? "1" : "0", batch_axis = attrs.layout == 1 ? "0" : "1";
  const BodyText::Values axes{
      {"t0", time_axis},
      {"t1", attrs.layout == 1 ? "2" : "1"},
      {"n0", batch_axis},
      {"n1", attrs.layout == 1 ? "1" : "2"}};
  text.Add(R"ONNX(
    axis_0 = Constant <value = int64[1] {0}> ()
    axis_1 = Constant <value = int64[1] {1}> ()
    axis_2 = Constant <value = int64[1] {2}> ()
    H = Shape <start = 2> (R)
  )ONNX");
  const bool transpose = attrs.layout == 1;
  text.Add(transpose && !attrs.project_batch_major ? "x = Transpose <perm = [1, 0, 2]> (X)" : "x = Identity (X)");
  if (ctx.hasInput(initial_h_index))
    text.Add(transpose ? "h0_all = Transpose <perm = [1, 0, 2]> (initial_h)" : "h0_all = Identity (initial_h)");
  if (initial_c_index >= 0 && ctx.hasInput(initial_c_index))
    text.Add(transpose ? "c0_all = Transpose <perm = [1, 0, 2]> (initial_c)" : "c0_all = Identity (initial_c)");
  const bool has_mask = ctx.hasInput(mask_index);
  const bool has_lens = ctx.hasInput(sequence_lens_index);
  std::string m_tn; // the effective mask, time-major [T, N]
  if (has_mask) {
    // mask must have exactly the shape of X's first two axes: concatenated with a tensor of that
    // shape along a new axis, it fails at run time otherwise (no silent broadcast).
    text.Add(R"ONNX(
      XTN = Shape <start = 0, end = 2> (X)
      like_x = ConstantOfShape <value = bool[1] {1}> (XTN)
      mask_0 = Unsqueeze (mask, axis_0)
      like_x_0 = Unsqueeze (like_x, axis_0)
      checked = Concat <axis = 0> (mask_0, like_x_0)
      mask_index = Constant <value = int64 {0}> ()
      mask_checked = Gather <axis = 0> (checked, mask_index)
    )ONNX");
    if (transpose)
      text.Add("mask_tn = Transpose <perm = [1, 0]> (mask_checked)");
    m_tn = transpose ? "mask_tn" : "mask_checked";
  }
  if (has_lens) {
    // m = mask AND t < sequence_lens
    text.Add(
        R"ONNX(
      T = Shape <start = {t0}, end = {t1}> (X)
      T_scalar = Squeeze (T)
      t_start = Constant <value = int64 {0}> ()
      t_delta = Constant <value = int64 {1}> ()
      t = Range (t_start, T_scalar, t_delta)
      t_col = Unsqueeze (t, axis_1)
      lens = Cast <to = 7> (sequence_lens)
      lens_row = Unsqueeze (lens, axis_0)
      within = Less (t_col, lens_row)
    )ONNX",
        axes);
    if (has_mask)
      text.Add("m_tn = And (" + m_tn + ", within)");
    m_tn = has_mask ? "m_tn" : "within";
  }
  if (!m_tn.empty())
    text.Add("m = Unsqueeze (" + m_tn + ", axis_2)"); // [T, N, 1]: a step's m_t broadcasts over [N, H]
  if (!ctx.hasInput(initial_h_index) || (initial_c_index >= 0 && !ctx.hasInput(initial_c_index))) {
    text.Add(
        R"ONNX(
      N = Shape <start = {n0}, end = {n1}> (X)
      NH = Concat <axis = 0> (N, H)
      zeros_f = ConstantOfShape (NH)
      zeros = CastLike (zeros_f, X)
    )ONNX",
        axes);
  }
  return !m_tn.empty();
}

std::string TimeMajor(BodyText& text, const MaskedRNNAttributes& attrs, const std::string& projection) {
  if (!attrs.project_batch_major)
    return projection;
  text.Add(projection + "_tm = Transpose <perm = [1, 0, 2]> (" + projection + ")");
  return projection + "_tm";
}

void AddEpilogue(BodyText& text, const MaskedRNNAttributes& attrs, bool lstm) {
  std::vector<std::string> outputs{"Y", "Y_h"};
  if (lstm)
    outputs.push_back("Y_c");
  for (const auto& out : outputs) {
    const BodyText::Values names{
        {"out", out},
        {"tm", attrs.layout == 1 ? out + "_tm" : out + "_rec"},
        {"axis", out == "Y" ? "1" : "0"},
        {"perm", out == "Y" ? "[2, 0, 1, 3]" : "[1, 0, 2]"}};
    text.Add(
        attrs.num_directions() == 2 ? "{tm} = Concat <axis = {axis}> ({out}_0, {out}_1)" : "{tm} = Identity ({out}_0)",
        names);
    if (attrs.layout == 1)
      text.Add("{out}_rec = Transpose <perm = {perm}> ({tm})", names);
  }
}

std::string GuardEmpty(
    const BodyText& recurrence,
    const MaskedRNNAttributes& attrs,
    bool lstm,
    bool has_initial_h,
    bool has_initial_c) {
  BodyText none(recurrence.elem_type());
  const bool batch_major = attrs.layout == 1;
  none.Add(
      R"ONNX(
        T_none = Shape <start = {t0}, end = {t1}> (X)
        N_none = Shape <start = {n0}, end = {n1}> (X)
        D_none = Constant <value = int64[1] {{D}}> ()
        H_none = Shape <start = 2, end = 3> (R)
        Y_shape = Concat <axis = 0> ({y_dims})
        Y_zeros = ConstantOfShape (Y_shape)
        Y_none = CastLike (Y_zeros, X)
        state_shape = Concat <axis = 0> ({state_dims})
        state_zeros_f = ConstantOfShape (state_shape)
        state_zeros = CastLike (state_zeros_f, X)
        Y_h_none = Identity ({h0})
      )ONNX",
      {{"t0", batch_major ? "1" : "0"},
       {"t1", batch_major ? "2" : "1"},
       {"n0", batch_major ? "0" : "1"},
       {"n1", batch_major ? "1" : "2"},
       {"D", std::to_string(attrs.num_directions())},
       {"y_dims", batch_major ? "N_none, T_none, D_none, H_none" : "T_none, D_none, N_none, H_none"},
       {"state_dims", batch_major ? "N_none, D_none, H_none" : "D_none, N_none, H_none"},
       {"h0", has_initial_h ? "initial_h" : "state_zeros"}});
  std::string outputs = "Y, Y_h", none_outputs = none.Param("Y_none", 4) + ", " + none.Param("Y_h_none", 3);
  std::string rec_outputs = none.Param("Y_rec", 4) + ", " + none.Param("Y_h_rec", 3);
  if (lstm) {
    none.Add(std::string("Y_c_none = Identity (") + (has_initial_c ? "initial_c)" : "state_zeros)"));
    outputs += ", Y_c";
    none_outputs += ", " + none.Param("Y_c_none", 3);
    rec_outputs += ", " + none.Param("Y_c_rec", 3);
  }
  // seq_length · batch_size, not Size(X): X of shape [T, N, 0] still has steps to process.
  BodyText guard(recurrence.elem_type());
  guard.Add(
      R"ONNX(
        X_shape = Shape (X)
        dim_0_index = Constant <value = int64 {0}> ()
        dim_1_index = Constant <value = int64 {1}> ()
        dim_0 = Gather (X_shape, dim_0_index)
        dim_1 = Gather (X_shape, dim_1_index)
        steps = Mul (dim_0, dim_1)
        no_steps = Constant <value = int64 {0}> ()
        empty = Equal (steps, no_steps)
        {outputs} = If (empty) <then_branch = nothing_processed () => ({none_outputs}) {
      )ONNX",
      {{"outputs", outputs}, {"none_outputs", none_outputs}});
  return guard.str() + none.str() + "}, else_branch = recurrence () => (" + rec_outputs + ") {\n" + recurrence.str() +
      "}>\n";
}

std::string InitialState(BodyText& text, bool present, const std::string& all, const std::string& name, int d) {
  if (!present)
    return "zeros";
  text.AddFor(d, "{name}{d} = Gather <axis = 0> ({all}, dir{d})", {{"name", name}, {"all", all}});
  return name + "_" + std::to_string(d);
}

bool BuildFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto,
    const MaskedOp& op,
    const CellBuilder& cell) {
  const TypeProto* x_type = ctx.getInputType(0);
  if (x_type == nullptr || !x_type->has_tensor_type() || ElemTypeName(x_type->tensor_type().elem_type()).empty())
    return false;
  MaskedRNNAttributes attrs;
  const std::vector<std::string> defaults(op.default_activations, op.default_activations + op.num_activations);
  if (!ReadAttributes(ctx, defaults, attrs))
    return false;
  const bool lstm = op.lstm(), grouped = op.first_gates != nullptr;
  const BodyText::Values groups{{"a", grouped ? op.first_gates : ""}, {"b", grouped ? op.last_gate : ""}};
  BodyText text(x_type->tensor_type().elem_type());
  const bool masked = AddPrologue(text, ctx, attrs, 4, 5, lstm ? 6 : -1, op.mask_index);
  if (grouped) // the sizes of the two groups of gates: (G-1)·H and H
    text.Add(
        R"ONNX(
      first_gates = Constant <value = int64[1] {{count}}> ()
      H_first = Mul (H, first_gates)
      gate_split = Concat <axis = 0> (H_first, H)
    )ONNX",
        {{"count", std::to_string(op.num_gates - 1)}});
  for (int d = 0; d < attrs.num_directions(); ++d) {
    const std::string s = "_" + std::to_string(d);
    // X·Wᵀ of all steps is computed before the Scan; the step reads Rᵀ as a pass-through state.
    text.AddFor(d, R"ONNX(
      dir{d} = Constant <value = int64 {{dir}}> ()
      W{d} = Gather <axis = 0> (W, dir{d})
      W_t{d} = Transpose (W{d})
      R{d} = Gather <axis = 0> (R, dir{d})
      R_t{d} = Transpose (R{d})
    )ONNX");
    ScanParts parts;
    parts.states.push_back({InitialState(text, ctx.hasInput(5), "h0_all", "h0", d), "h", "h_new"});
    if (lstm)
      parts.states.push_back({InitialState(text, ctx.hasInput(6), "c0_all", "c0", d), "c", "c_new"});
    if (grouped) {
      text.AddFor(
          d,
          R"ONNX(
        W_{a}_t{d}, W_{b}_t{d} = Split <axis = -1> (W_t{d}, gate_split)
        R_{a}_t{d}, R_{b}_t{d} = Split <axis = -1> (R_t{d}, gate_split)
        xw_{a}{d} = MatMul (x, W_{a}_t{d})
        xw_{b}{d} = MatMul (x, W_{b}_t{d})
      )ONNX",
          groups);
      for (const std::string group : {op.first_gates, op.last_gate})
        parts.pass_through.push_back({"R_" + group + "_t" + s, "R_" + group + "_t", 2});
    } else {
      text.AddFor(d, "xw{d} = MatMul (x, W_t{d})");
      parts.pass_through.push_back({"R_t" + s, "R_t", 2});
    }
    if (ctx.hasInput(3))
      text.AddFor(d, R"ONNX(
        B{d} = Gather <axis = 0> (B, dir{d})
        Wb{d}, Rb{d} = Split <axis = 0, num_outputs = 2> (B{d})
      )ONNX");
    BodyText step(text.elem_type());
    step.BodyConstants(attrs);
    cell(ctx, attrs, d, text, parts, step);
    AddDirectionScan(text, attrs, d, masked, ctx.hasInput(5), parts, step);
  }
  AddEpilogue(text, attrs, lstm);

  FunctionBuilder builder(functionProto);
  builder.Add(GuardEmpty(text, attrs, lstm, ctx.hasInput(5), lstm && ctx.hasInput(6)).c_str());
  schema.BuildFunction(functionProto);
  return true;
}

std::function<void(OpSchema&)> MaskedRNNSchema(const MaskedOp& op, CellBuilder cell) {
  return [op, cell](OpSchema& schema) {
    schema.SetDoc(GET_OP_DOC_STR(ComposeDoc(op, schema.doc() ? schema.doc() : "")));
    schema.Attr("masked_output", Strip(op.doc.masked_output), AttributeProto::STRING, std::string("zero"));
    schema.Input(
        op.mask_index, "mask", Strip(kMaskDoc), "T2", OpSchema::Optional, true, 1, OpSchema::NonDifferentiable);
    schema.TypeConstraint("T2", {"tensor(bool)"}, "Constrain mask to boolean tensor.");
    schema.TypeAndShapeInferenceFunction([op](InferenceContext& ctx) {
      MaskedRNNChecks checks(ctx, op);
      checks.Attributes();
      checks.Types();
      checks.Shapes();
      checks.Outputs();
    });
    schema.SetContextDependentFunctionBodyBuilder(
        [op, cell](const FunctionBodyBuildContext& ctx, const OpSchema& built, FunctionProto& function) {
          return BuildFunctionBody(ctx, built, function, op, cell);
        },
        1);
    schema.SetSupportLevel(OpSchema::SupportType::EXPERIMENTAL);
  };
}

} // namespace masked_rnn
} // namespace ONNX_NAMESPACE
