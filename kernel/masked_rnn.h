// The kernel of MaskedLSTM, MaskedGRU and MaskedRNN (spec/semantics.md): one object per node,
// immutable after construction, so one session may run it from several threads at once.
#pragma once

#include <memory>

#include "attributes.h"
#include "gemm.h"
#include "ort_api.h"

namespace omr {

class MaskedRnnKernel {
 public:
  // `type`: the element type of X (float, double, float16 or bfloat16).
  MaskedRnnKernel(OpKind op, ONNXTensorElementDataType type, const OrtKernelInfo* info);

  void Compute(OrtKernelContext* context) const;

 private:
  Attributes attrs_;
  ONNXTensorElementDataType type_;
  std::unique_ptr<Gemm<float>> gemm_float_;    // float32, float16 and bfloat16
  std::unique_ptr<Gemm<double>> gemm_double_;  // float64
};

}  // namespace omr
