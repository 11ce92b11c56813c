// A node's attributes, validated and with every default applied, as
// onnx_masked_rnn/attributes.py (parse_attributes) defines them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ort_api.h"

namespace omr {

enum class OpKind { kLstm, kGru, kRnn };

const char* OpName(OpKind kind);
int NumGates(OpKind kind);

enum class ActivationKind {
  kRelu,
  kTanh,
  kSigmoid,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus,
};

struct Activation {
  ActivationKind kind;
  float alpha;
  float beta;
};

struct Attributes {
  OpKind op;
  int num_directions = 1;
  bool reverse = false;  // direction == "reverse"
  int layout = 0;
  std::vector<Activation> activations[2];  // per direction, in ONNX order (LSTM f, g, h; ...)
  bool has_clip = false;
  float clip = 0;
  int64_t hidden_size = -1;  // -1: absent (read from R)
  bool input_forget = false;
  bool linear_before_reset = false;
  bool carry = false;  // masked_output == "carry"
};

// Reads and validates the attributes; throws KernelError naming the attribute.
Attributes ReadAttributes(OpKind op, const OrtKernelInfo* info);

}  // namespace omr
