#include "attributes.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <deque>
#include <optional>

#include "status.h"

namespace omr {

namespace {

struct ActivationInfo {
  const char* name;
  ActivationKind kind;
  bool takes_alpha;
  bool takes_beta;
  float alpha;  // defaults: those of the ONNX operator of the name, or spec/semantics.md section 9
  float beta;
};

constexpr ActivationInfo kActivations[] = {
    {"Relu", ActivationKind::kRelu, false, false, 0.0f, 0.0f},
    {"Tanh", ActivationKind::kTanh, false, false, 0.0f, 0.0f},
    {"Sigmoid", ActivationKind::kSigmoid, false, false, 0.0f, 0.0f},
    {"Affine", ActivationKind::kAffine, true, true, 1.0f, 0.0f},
    {"LeakyRelu", ActivationKind::kLeakyRelu, true, false, 0.01f, 0.0f},
    {"ThresholdedRelu", ActivationKind::kThresholdedRelu, true, false, 1.0f, 0.0f},
    {"ScaledTanh", ActivationKind::kScaledTanh, true, true, 1.0f, 1.0f},
    {"HardSigmoid", ActivationKind::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"Elu", ActivationKind::kElu, true, false, 1.0f, 0.0f},
    {"Softsign", ActivationKind::kSoftsign, false, false, 0.0f, 0.0f},
    {"Softplus", ActivationKind::kSoftplus, false, false, 0.0f, 0.0f},
};

std::string Lower(const std::string& s) {
  std::string out = s;
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// Each getter returns nullopt when the node does not carry the attribute (the runtime's status
// for an absent attribute is released, not reported).
std::optional<std::string> GetString(const OrtKernelInfo* info, const char* name) {
  size_t size = 0;
  OrtStatus* status = ORT_CALL(KernelInfoGetAttribute_string, info, name, nullptr, &size);
  if (status != nullptr) {
    ORT_CALL(ReleaseStatus, status);
    return std::nullopt;
  }
  std::string value(size, '\0');
  Check(ORT_CALL(KernelInfoGetAttribute_string, info, name, value.data(), &size));
  value.resize(size > 0 ? size - 1 : 0);  // size counts the terminating NUL
  return value;
}

std::optional<int64_t> GetInt(const OrtKernelInfo* info, const char* name) {
  int64_t value = 0;
  OrtStatus* status = ORT_CALL(KernelInfoGetAttribute_int64, info, name, &value);
  if (status != nullptr) {
    ORT_CALL(ReleaseStatus, status);
    return std::nullopt;
  }
  return value;
}

std::optional<float> GetFloat(const OrtKernelInfo* info, const char* name) {
  float value = 0;
  OrtStatus* status = ORT_CALL(KernelInfoGetAttribute_float, info, name, &value);
  if (status != nullptr) {
    ORT_CALL(ReleaseStatus, status);
    return std::nullopt;
  }
  return value;
}

std::optional<std::vector<float>> GetFloats(const OrtKernelInfo* info, const char* name) {
  size_t size = 0;
  OrtStatus* status = ORT_CALL(KernelInfoGetAttributeArray_float, info, name, nullptr, &size);
  if (status != nullptr) {
    ORT_CALL(ReleaseStatus, status);
    return std::nullopt;
  }
  std::vector<float> values(size);
  if (size > 0)
    Check(ORT_CALL(KernelInfoGetAttributeArray_float, info, name, values.data(), &size));
  return values;
}

std::optional<std::vector<std::string>> GetStrings(const OrtKernelInfo* info, const char* name) {
  OrtAllocator* allocator = nullptr;
  Check(ORT_CALL(GetAllocatorWithDefaultOptions, &allocator));
  char** raw = nullptr;
  size_t size = 0;
  OrtStatus* status =
      ORT_CALL(KernelInfoGetAttributeArray_string, info, name, allocator, &raw, &size);
  if (status != nullptr) {
    ORT_CALL(ReleaseStatus, status);
    return std::nullopt;
  }
  std::vector<std::string> values;
  for (size_t i = 0; i < size; ++i) {
    values.emplace_back(raw[i]);
    Check(ORT_CALL(AllocatorFree, allocator, raw[i]));
  }
  if (raw != nullptr) Check(ORT_CALL(AllocatorFree, allocator, raw));
  return values;
}

std::string Join(const std::vector<std::string>& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "]";
}

std::string FloatText(float v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

}  // namespace

const char* OpName(OpKind kind) {
  switch (kind) {
    case OpKind::kLstm:
      return "MaskedLSTM";
    case OpKind::kGru:
      return "MaskedGRU";
    case OpKind::kRnn:
      return "MaskedRNN";
  }
  return "";
}

int NumGates(OpKind kind) { return kind == OpKind::kLstm ? 4 : kind == OpKind::kGru ? 3 : 1; }

Attributes ReadAttributes(OpKind op, const OrtKernelInfo* info) {
  const std::string prefix = std::string(OpName(op)) + ": attribute ";
  auto fail = [&](const std::string& what) {
    throw KernelError(ORT_INVALID_ARGUMENT, prefix + what);
  };
  Attributes attrs;
  attrs.op = op;

  std::string direction = GetString(info, "direction").value_or("forward");
  if (direction == "bidirectional") {
    attrs.num_directions = 2;
  } else if (direction == "reverse") {
    attrs.reverse = true;
  } else if (direction != "forward") {
    fail("'direction' must be one of ['forward', 'reverse', 'bidirectional'], got '" + direction +
         "'");
  }
  std::string masked_output = GetString(info, "masked_output").value_or("zero");
  if (masked_output == "carry") {
    attrs.carry = true;
  } else if (masked_output != "zero") {
    fail("'masked_output' must be one of ['zero', 'carry'], got '" + masked_output + "'");
  }
  auto flag = [&](const char* name) {
    int64_t value = GetInt(info, name).value_or(0);
    if (value != 0 && value != 1) {
      fail(std::string("'") + name + "' must be one of [0, 1], got " + std::to_string(value));
    }
    return value == 1;
  };
  attrs.layout = flag("layout") ? 1 : 0;
  if (op == OpKind::kLstm) attrs.input_forget = flag("input_forget");
  if (op == OpKind::kGru) attrs.linear_before_reset = flag("linear_before_reset");
  if (auto clip = GetFloat(info, "clip")) {
    if (std::isnan(*clip) || *clip <= 0) {
      fail("'clip' must be a positive number, got " + FloatText(*clip));
    }
    attrs.has_clip = true;
    attrs.clip = *clip;
  }
  if (auto hidden_size = GetInt(info, "hidden_size")) {
    if (*hidden_size <= 0) {
      fail("'hidden_size' must be a positive integer, got " + std::to_string(*hidden_size));
    }
    attrs.hidden_size = *hidden_size;
  }

  const size_t per_direction = op == OpKind::kLstm ? 3 : op == OpKind::kGru ? 2 : 1;
  const size_t expected = per_direction * attrs.num_directions;
  std::vector<std::string> names;
  if (auto listed = GetStrings(info, "activations")) {
    names = *listed;
    bool rnn_pair = op == OpKind::kRnn && attrs.num_directions == 1 && names.size() == 2;
    if (names.size() != expected && !rnn_pair) {
      fail("'activations' must list " + std::to_string(expected) + " functions (" +
           std::to_string(per_direction) + " per direction x " +
           std::to_string(attrs.num_directions) + " direction(s)) for " + OpName(op) + ", got " +
           std::to_string(names.size()) + ": " + Join(names));
    }
  } else {
    const char* defaults[] = {"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < attrs.num_directions; ++d) {
      for (size_t k = 0; k < per_direction; ++k) {
        names.push_back(op == OpKind::kRnn ? "Tanh" : defaults[k]);
      }
    }
  }
  std::deque<float> alphas, betas;
  if (auto values = GetFloats(info, "activation_alpha"))
    alphas.assign(values->begin(), values->end());
  if (auto values = GetFloats(info, "activation_beta"))
    betas.assign(values->begin(), values->end());
  std::vector<Activation> resolved;
  for (const std::string& raw : names) {
    const ActivationInfo* found = nullptr;
    for (const ActivationInfo& a : kActivations) {
      if (Lower(a.name) == Lower(raw)) found = &a;
    }
    if (found == nullptr) {
      std::vector<std::string> known;
      for (const ActivationInfo& a : kActivations) known.push_back(a.name);
      std::sort(known.begin(), known.end());
      fail("'activations' has unknown function '" + raw + "'; expected one of " + Join(known));
    }
    Activation act{found->kind, found->takes_alpha ? found->alpha : 0.0f,
                   found->takes_beta ? found->beta : 0.0f};
    if (found->takes_alpha && !alphas.empty()) {
      act.alpha = alphas.front();
      alphas.pop_front();
    }
    if (found->takes_beta && !betas.empty()) {
      act.beta = betas.front();
      betas.pop_front();
    }
    resolved.push_back(act);
  }
  if (!alphas.empty()) {
    fail("'activation_alpha' has " + std::to_string(alphas.size()) +
         " value(s) that no activation takes");
  }
  if (!betas.empty()) {
    fail("'activation_beta' has " + std::to_string(betas.size()) +
         " value(s) that no activation takes");
  }
  for (int d = 0; d < attrs.num_directions; ++d) {
    attrs.activations[d].assign(resolved.begin() + d * per_direction,
                                resolved.begin() + (d + 1) * per_direction);
  }
  return attrs;
}

}  // namespace omr
