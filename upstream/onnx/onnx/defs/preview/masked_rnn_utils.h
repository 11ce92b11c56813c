// Copyright (c) ONNX Project Contributors
//
// SPDX-License-Identifier: Apache-2.0

// What MaskedLSTM (masked_lstm.cc), MaskedGRU (masked_gru.cc) and MaskedRNN (masked_rnn.cc) share:
// the schema additions to their ONNX counterpart's schema (the `mask` input, the `masked_output`
// attribute, shape inference) and the parts of their function bodies, one Scan + Where per direction.

#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "onnx/defs/function.h"
#include "onnx/defs/schema.h"

namespace ONNX_NAMESPACE {
namespace masked_rnn {

// One operator's doc text, generated into its source from the package's onnx_masked_rnn/schema_doc.py
// (scripts/generate_upstream_doc.py): the doc string before the part restated from the ONNX
// counterpart's (head), the values of the placeholders of kDocTail (the part after it, the same for
// the three operators) and the description of the attribute the operator adds (that of `mask` is
// the same for the three).
struct DocText {
  const char* head;
  const char* cell; // {cell}
  const char* static_errors; // {static_errors}
  const char* new_state; // {new}
  const char* prev; // {prev}
  const char* state; // {state}
  const char* finals; // {finals}
  const char* initials; // {initials}
  const char* masked_output;
};

// What the schema and the shape inference of one masked operator need to know of it.
struct MaskedOp {
  const char* name; // "MaskedLSTM"
  int num_gates; // 4, 3, 1
  int num_activations; // per direction: 3, 2, 1
  int mask_index; // 8, 6, 6
  const char* flag; // the 0/1 attribute of the cell: "input_forget", "linear_before_reset" or nullptr
  // The names of the two groups of gates the body projects apart, the last gate alone (LSTM: "iof"
  // and "c"; GRU: "zr" and "h"); nullptr for RNN's one gate.
  const char* first_gates;
  const char* last_gate;
  const char* default_activations[3]; // per direction, num_activations of them
  const DocText& doc;

  bool lstm() const {
    return mask_index == 8; // initial_c and P are LSTM's
  }
};

// The parameters of one activation function, resolved from the node's attributes.
struct Activation {
  std::string name; // canonical spelling, as in LSTM-22's list
  float alpha = 0.0f;
  float beta = 0.0f;
};

// The node's attributes that shape its function body.
struct MaskedRNNAttributes {
  std::string direction = "forward";
  int64_t layout = 0;
  std::string masked_output = "zero";
  bool has_clip = false;
  float clip = 0.0f;
  int64_t input_forget = 0;
  int64_t linear_before_reset = 0;
  // Batch-major float16 X: projected as it is, the projections then made time-major (TimeMajor).
  bool project_batch_major = false;
  // activations[d] holds direction d's functions (LSTM: f, g, h; GRU: f, g; RNN: f).
  std::vector<std::vector<Activation>> activations;

  int num_directions() const {
    return direction == "bidirectional" ? 2 : 1;
  }
  bool reverse(int d) const {
    return direction == "reverse" || d == 1;
  }
};

// Reads and validates the attributes; false for a node that has no valid function body.
bool ReadAttributes(
    const FunctionBodyBuildContext& ctx,
    const std::vector<std::string>& default_activations,
    MaskedRNNAttributes& attrs);

// The ONNX textual syntax's name of a tensor element type the bodies support, "" for the others.
std::string ElemTypeName(int32_t elem_type);

// `value` as a float literal of the ONNX textual syntax (all digits a float needs).
std::string FormatFloat(float value);

// The text of a function body or a Scan body in the ONNX textual syntax, written in blocks of nodes.
class BodyText {
 public:
  using Values = std::vector<std::pair<std::string, std::string>>;

  explicit BodyText(int32_t elem_type) : elem_type_(elem_type), type_name_(ElemTypeName(elem_type)) {}

  // Appends `nodes` (one node a line), each `{key}` of `values` replaced by its value.
  BodyText& Add(std::string nodes, const Values& values = {}) {
    for (const auto& [key, value] : values)
      ReplaceAll(nodes, ("{" + key + "}").c_str(), value.c_str());
    text_ += nodes;
    if (!nodes.empty() && nodes.back() != '\n')
      text_ += "\n";
    return *this;
  }

  // Appends direction d's `nodes`: `{d}` is its suffix (_0, _1), `{dir}` its index.
  BodyText& AddFor(int d, const std::string& nodes, Values values = {}) {
    values.emplace_back("d", "_" + std::to_string(d));
    values.emplace_back("dir", std::to_string(d));
    return Add(nodes, values);
  }

  // `name` = a scalar of X's element type: a float `value` tensor, cast.
  void Scalar(const std::string& name, float value) {
    Add("{n}_f = Constant <value = float {" + FormatFloat(value) + "}> ()\n{n} = Cast <to = {t}> ({n}_f)",
        {{"n", name}, {"t", std::to_string(elem_type_)}});
  }

  // y = act(x), decomposed into ai.onnx ops where the activation is no operator (Affine,
  // ScaledTanh) or where runtimes lack kernels for some float types; the package's bodies
  // (onnx_masked_rnn/functions/cells.py, `activation`) write the same nodes.
  void Apply(const Activation& act, const std::string& x, const std::string& y) {
    const std::string& n = act.name;
    const Values names{{"x", x}, {"y", y}};
    if (n == "Relu" || n == "Tanh" || n == "Sigmoid") {
      Add(y + " = " + n + " (" + x + ")");
      return;
    }
    if (n == "Softsign") {
      Scalar(y + "_one", 1.0f);
      Add(R"ONNX(
        {y}_abs = Abs ({x})
        {y}_den = Add ({y}_one, {y}_abs)
        {y} = Div ({x}, {y}_den)
      )ONNX",
          names);
      return;
    }
    if (n == "Softplus") { // max(x, 0) + log(1 + exp(-|x|)): cannot overflow
      Scalar(y + "_one", 1.0f);
      Add(R"ONNX(
        {y}_relu = Relu ({x})
        {y}_abs = Abs ({x})
        {y}_neg = Neg ({y}_abs)
        {y}_exp = Exp ({y}_neg)
        {y}_sum = Add ({y}_one, {y}_exp)
        {y}_log = Log ({y}_sum)
        {y} = Add ({y}_relu, {y}_log)
      )ONNX",
          names);
      return;
    }
    Scalar(y + "_alpha", act.alpha);
    if (n == "Affine") {
      Scalar(y + "_beta", act.beta);
      Add(R"ONNX(
        {y}_ax = Mul ({y}_alpha, {x})
        {y} = Add ({y}_ax, {y}_beta)
      )ONNX",
          names);
    } else if (n == "HardSigmoid") {
      Scalar(y + "_beta", act.beta);
      Scalar(y + "_zero", 0.0f);
      Scalar(y + "_one", 1.0f);
      Add(R"ONNX(
        {y}_ax = Mul ({y}_alpha, {x})
        {y}_lin = Add ({y}_ax, {y}_beta)
        {y}_min = Min ({y}_one, {y}_lin)
        {y} = Max ({y}_zero, {y}_min)
      )ONNX",
          names);
    } else if (n == "ScaledTanh") {
      Scalar(y + "_beta", act.beta);
      Add(R"ONNX(
        {y}_bx = Mul ({y}_beta, {x})
        {y}_tanh = Tanh ({y}_bx)
        {y} = Mul ({y}_alpha, {y}_tanh)
      )ONNX",
          names);
    } else if (n == "LeakyRelu") {
      Scalar(y + "_zero", 0.0f);
      Add(R"ONNX(
        {y}_pos = GreaterOrEqual ({x}, {y}_zero)
        {y}_neg = Mul ({y}_alpha, {x})
        {y} = Where ({y}_pos, {x}, {y}_neg)
      )ONNX",
          names);
    } else if (n == "Elu") {
      Scalar(y + "_zero", 0.0f);
      Scalar(y + "_one", 1.0f);
      Add(R"ONNX(
        {y}_pos = GreaterOrEqual ({x}, {y}_zero)
        {y}_exp = Exp ({x})
        {y}_em1 = Sub ({y}_exp, {y}_one)
        {y}_neg = Mul ({y}_alpha, {y}_em1)
        {y} = Where ({y}_pos, {x}, {y}_neg)
      )ONNX",
          names);
    } else { // ThresholdedRelu
      Scalar(y + "_zero", 0.0f);
      Add(R"ONNX(
        {y}_above = Greater ({x}, {y}_alpha)
        {y} = Where ({y}_above, {x}, {y}_zero)
      )ONNX",
          names);
    }
  }

  // x clipped to [-clip, clip] when the node has `clip` (bounds from BodyConstants).
  std::string Clip(const MaskedRNNAttributes& attrs, const std::string& x) {
    if (!attrs.has_clip)
      return x;
    Add(x + "_clipped = Clip (" + x + ", lo, hi)");
    return x + "_clipped";
  }

  // The clip bounds as Scan body constants.
  void BodyConstants(const MaskedRNNAttributes& attrs) {
    if (attrs.has_clip) {
      Scalar("hi", attrs.clip);
      Add("lo = Neg (hi)");
    }
  }

  // A typed Scan body parameter `name` of rank `rank` (the element type of X unless `type` says).
  std::string Param(const std::string& name, int rank, const std::string& type = "") const {
    std::string dims;
    for (int i = 0; i < rank; ++i)
      dims += i ? ", ?" : "?";
    return (type.empty() ? type_name_ : type) + "[" + dims + "] " + name;
  }

  const std::string& str() const {
    return text_;
  }
  int32_t elem_type() const {
    return elem_type_;
  }

 private:
  int32_t elem_type_;
  std::string type_name_;
  std::string text_;
};

// One Scan body parameter that is passed through unchanged (an outer value the step reads).
struct PassThrough {
  std::string outer; // the value before the Scan
  std::string inner; // its name in the body
  int rank;
};

// The per-step output and masked state update shared by the three ops' Scan bodies, and the
// Scan node itself. `states` are the recurrent state, h first: (initial value, name in the Scan body
// without its _prev/_next suffix, the cell's new value).
struct ScanParts {
  std::vector<std::array<std::string, 3>> states;
  std::vector<PassThrough> pass_through;
  std::vector<std::pair<std::string, std::string>> scan_inputs; // (outer, inner), rank 2 each
};

// Appends one direction's Scan and its outputs `Y_<d>` [T, 1, N, H] and `Y_h_<d>` (and `Y_c_<d>` for
// LSTM) [1, N, H]. `step` holds the cell's nodes, which compute the new state (`h_new`, `c_new`).
// Per step, with `m_t` the step's effective mask:
//
//   state = Where(m_t, new, state)     a masked step leaves the state untouched
//   y     = Where(m_t, h_new, 0)       "zero"
//   y     = Where(m_t, h_new, y_prev)  "carry": the previous output, 0 before the first
//
// When initial_h is absent the "carry" output is the state itself (it changes at processed steps
// only and is 0 before the first), so no y_prev is carried. Without mask and sequence_lens nothing
// is masked and the step has no Where.
void AddDirectionScan(
    BodyText& text,
    const MaskedRNNAttributes& attrs,
    int d,
    bool masked,
    bool has_initial_h,
    const ScanParts& parts,
    const BodyText& step);

// The op-level prologue: time-major X and initial states, the effective mask m [T, N, 1] when the
// node has mask or sequence_lens, zeros for absent initial states. Returns whether m exists.
bool AddPrologue(
    BodyText& text,
    const FunctionBodyBuildContext& ctx,
    MaskedRNNAttributes& attrs,
    int sequence_lens_index,
    int initial_h_index,
    int initial_c_index,
    int mask_index);

// The projection `projection` ([T, N, k] for time-major x), time-major: as it is, or transposed
// when X was projected batch-major (attrs.project_batch_major).
std::string TimeMajor(BodyText& text, const MaskedRNNAttributes& attrs, const std::string& projection);

// The op-level epilogue: directions concatenated, outputs back in `layout`, named `<output>_rec`.
void AddEpilogue(BodyText& text, const MaskedRNNAttributes& attrs, bool lstm);

// The op's cell in one direction `d` of its function body: appends to `text` what precedes the Scan
// (bias, peepholes; the projections `xw_<first_gates>_<d>` and `xw_<last_gate>_<d>`, or `xw_<d>`, and
// Wb<d>, Rb<d> when B is given are made), completes `parts` (its scan inputs, pass-through values
// beyond R's) and writes the step's nodes into `step`, which compute h_new (and c_new).
using CellBuilder = std::function<void(
    const FunctionBodyBuildContext& ctx,
    const MaskedRNNAttributes& attrs,
    int d,
    BodyText& text,
    ScanParts& parts,
    BodyText& step)>;

// The counterpart's schema (LSTM-22, GRU-22 or RNN-22) turned into the masked operator's: its doc
// string, the `mask` input, the `masked_output` attribute, type constraint T2, shape inference and
// the context-dependent function body (BuildFunctionBody around `cell`).
std::function<void(OpSchema&)> MaskedRNNSchema(const MaskedOp& op, CellBuilder cell);

// The op's context-dependent function body: the prologue, one Scan per direction around `cell`, the
// epilogue and GuardEmpty. False (no body) for X of an unsupported type or invalid attributes.
bool BuildFunctionBody(
    const FunctionBodyBuildContext& ctx,
    const OpSchema& schema,
    FunctionProto& functionProto,
    const MaskedOp& op,
    const CellBuilder& cell);

// The function's nodes: `recurrence` (the effective mask and the Scans, outputs `<output>_rec`) when X
// has a step and a row, else the outputs of no processed step: Y zeros, Y_h/Y_c the initial states
// (zeros when absent). onnxruntime's Scan fails on a sequence of length 0.
std::string GuardEmpty(
    const BodyText& recurrence,
    const MaskedRNNAttributes& attrs,
    bool lstm,
    bool has_initial_h,
    bool has_initial_c);

// The direction's initial state `initial` (h0_all or c0_all) or zeros.
std::string InitialState(BodyText& text, bool present, const std::string& all, const std::string& name, int d);

} // namespace masked_rnn
} // namespace ONNX_NAMESPACE
