// The recurrent product on weights packed once per run, for float32 on x86-64 CPUs with AVX-512F
// or AVX2 and FMA: out[m, n] = a[m, k] · b[n, k]ᵀ.
//
// onnxruntime's own LSTM packs its recurrent weights once, when the session is made (PrePack);
// its Gemm called through the C API cannot, and packs them again at every step. Packing once per
// run keeps the kernel free of state between runs. Every element is the same chain of fused
// multiply-adds over k in order, on either instruction set and for any number of threads.
#pragma once

#include <cstdint>
#include <vector>

namespace omr {

inline constexpr char kProductVariable[] = "ONNX_MASKED_RNN_KERNEL_PRODUCT";

class PackedProduct {
 public:
  // Whether this CPU (and build) has a packed product; otherwise the caller uses onnxruntime's
  // Gemm. The environment variable kProductVariable chooses: auto (the default, also when empty:
  // AVX-512F, else AVX2 with FMA, else none), avx512, avx2 or runtime (onnxruntime's Gemm); another
  // value, or an instruction set the CPU lacks, is a KernelError naming the variable.
  static bool Available();

  // Keeps b, which must outlive it, for Pack.
  PackedProduct(const float* b, int64_t n, int64_t k);

  // Packs b, the first time it is called; before Run, on one thread.
  void Pack();

  int64_t panels() const { return panels_; }

  // Columns [panel_first, panel_last) * kPanel (bounded by n) of out for the first m rows of a;
  // out's rows are n long.
  void Run(const float* a, int64_t m, float* out, int64_t panel_first, int64_t panel_last) const;

  static constexpr int64_t kPanel = 32;

 private:
  const float* b_;
  int64_t n_, k_, panels_;
  std::vector<float> packed_;  // panel p: k rows of kPanel columns (zero past n)
};

}  // namespace omr
