// The step's products on weights packed once per run, for float32 on x86-64 CPUs with AVX-512F
// or AVX2 and FMA: out[m, n] = a[m, k] · b[n, k]ᵀ, where b may be two matrices side by side
// ([W | R], so that a row [x_t | h] gives a step's gates in one product).
//
// onnxruntime's own LSTM packs its weights once, when the session is made (PrePack); its Gemm
// called through the C API cannot, and packs them again at every call. Packing once per run keeps
// the kernel free of state between runs. Every element is the same chain of fused multiply-adds
// over k in order, on either instruction set, whatever rows are run together and on any thread.
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

  // Keeps b, which must outlive it, for Pack. With b2 (n rows of k2), the product is of b and b2
  // side by side, [b | b2], whose rows are k + k2 long.
  PackedProduct(const float* b, int64_t n, int64_t k, const float* b2 = nullptr, int64_t k2 = 0);

  // Packs b, the first time it is called; before Run, on one thread.
  void Pack();

  int64_t panels() const { return panels_; }

  // Columns [panel_first, panel_last) * kPanel (bounded by n) of out for the first m rows of a;
  // out's rows are n long.
  void Run(const float* a, int64_t m, float* out, int64_t panel_first, int64_t panel_last) const;

  static constexpr int64_t kPanel = 32;

  // Rows [row_first, row_last) of b (n rows of k) against one row a: out[j] = b[j, :] · a, on b
  // as it is (a matrix-vector product reads each element of b once, so packing would only add a
  // copy). The same instruction set as Run; each element is 16 (8 with AVX2) fused chains over k
  // added pairwise.
  static void MatVec(const float* b, int64_t k, const float* a, float* out, int64_t row_first,
                     int64_t row_last);

 private:
  const float* b_;
  const float* b2_;
  int64_t n_, k1_, k_, panels_;  // k_ = k1_ + b2's k
  std::vector<float> packed_;    // panel p: k rows of kPanel columns (zero past n)
};

}  // namespace omr
