// Matrix products: onnxruntime's own Gemm (MLAS) through CreateOp/InvokeOp where the runtime has
// a kernel for the type, and a plain loop otherwise and for products too small to be worth a call.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ort_api.h"
#include "packed_gemm.h"

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

  // One recurrent product repeated over a run's steps, out[m, n] = a[m, k] · b[n, k]ᵀ for the
  // first m rows of fixed buffers a and out: the runtime's tensors of b, and of a and out for each
  // m met, are made once per run instead of once per step (and b is transposed once for the
  // plain loop). In float32 on a CPU that has it (packed_gemm.h), the product runs on b packed
  // once per run, at its first step, instead of onnxruntime's Gemm, which packs b at every call;
  // `same_b`, a product of the same b, shares its packing. With max_m = 1 it is a
  // matrix-vector product on b as it is. Belongs to one Compute call: the kernel keeps no state
  // between runs.
  class Repeated {
   public:
    Repeated(const Gemm& gemm, const C* a, int64_t max_m, int64_t k, const C* b, int64_t n, C* out,
             const Repeated* same_b = nullptr);
    ~Repeated();
    Repeated(const Repeated&) = delete;
    Repeated& operator=(const Repeated&) = delete;

    void Run(const OrtKernelContext* context, int64_t m);

    // Whether the product runs on b packed, so that its rows can also be run apart (RunRows).
    bool packed() const { return packed_ != nullptr; }

    // Packs b if it is not yet: before RunRows, on one thread.
    void Prepare() { packed_->Pack(); }

    // Rows [first, last) of out = a · bᵀ, on the calling thread, for a packed product; a (rows k
    // long) stands for the buffer given at construction.
    void RunRows(const C* a, int64_t first, int64_t last) const;

   private:
    void RunPacked(const OrtKernelContext* context, int64_t m);
    void RunMatVec(const OrtKernelContext* context);

    const Gemm& gemm_;
    const C* a_;
    const C* b_;
    int64_t k_, n_;
    bool matvec_ = false;  // float32, one row: PackedProduct::MatVec
    C* out_;
    OrtValue* b_value_ = nullptr;
    std::vector<OrtValue*> a_values_, out_values_;  // by m, made on first use
    std::vector<C> bt_;                             // the plain loop's b transposed
    std::shared_ptr<PackedProduct> packed_;         // float32 only
  };

 private:
  OrtOp* with_bias_ = nullptr;
  OrtOp* without_bias_ = nullptr;
  OrtMemoryInfo* memory_ = nullptr;
};

}  // namespace omr
