// Matrix products: onnxruntime's own Gemm (MLAS) through CreateOp/InvokeOp where the runtime has
// a kernel for the type, and a plain loop otherwise and for products too small to be worth a call.
#pragma once

#include <cstdint>

#include "ort_api.h"

namespace omr {

template <class C>
class Gemm {
 public:
  explicit Gemm(const OrtKernelInfo* info);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out[m, n] = a[m, k] · b[n, k]ᵀ (+ bias[n] when given); all row-major and contiguous.
  void Run(const OrtKernelContext* context, const C* a, int64_t m, int64_t k, const C* b, int64_t n,
           const C* bias, C* out) const;

  // The same product with b given transposed, bt[k, n], by a plain loop.
  static void RunTransposed(const C* a, int64_t m, int64_t k, const C* bt, int64_t n, const C* bias,
                            C* out);

  bool uses_runtime() const { return with_bias_ != nullptr; }

 private:
  OrtOp* with_bias_ = nullptr;
  OrtOp* without_bias_ = nullptr;
  OrtMemoryInfo* memory_ = nullptr;
};

}  // namespace omr
