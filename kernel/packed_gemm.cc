#include "packed_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "status.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OMR_PACKED_X86 1
#include <immintrin.h>
#endif

namespace omr {

#ifdef OMR_PACKED_X86
// GCC 12's AVX-512 shuffle intrinsics start from an undefined vector, which -Wuninitialized reports
// wherever they are inlined (GCC bug 105593): the lanes read are all defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

constexpr int64_t kPanel = PackedProduct::kPanel;

// The lanes of a 16-float group g of a block `cols` columns wide (the rest lie past n).
inline unsigned Lanes(int64_t cols, int g) {
  const int64_t left = cols - 16 * int64_t{g};
  return left >= 16 ? 0xFFFFu : (left > 0 ? (1u << left) - 1 : 0u);
}

// Rows [0, Rows) of a against Panels consecutive panels, 2 x 16 columns per row and panel in
// AVX-512 registers. Few rows take several panels, so that enough independent chains of
// multiply-adds hide their latency; `cols` (at most Panels * kPanel) bounds what is stored.
template <int Rows, int Panels>
__attribute__((target("avx512f"))) void Block512(const float* a, int64_t k, const float* panel,
                                                 float* out, int64_t n, int64_t cols) {
  constexpr int V = 2 * Panels;
  const int64_t panel_size = k * kPanel;
  __m512 acc[Rows][V];
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m512 b[V];
    for (int v = 0; v < V; ++v)
      b[v] = _mm512_loadu_ps(panel + (v / 2) * panel_size + p * kPanel + 16 * (v % 2));
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * k + p]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) {
      _mm512_mask_storeu_ps(out + r * n + 16 * v, static_cast<__mmask16>(Lanes(cols, v)),
                            acc[r][v]);
    }
  }
}

// The same with 4 x 8 columns per row and panel in AVX2 registers.
template <int Rows, int Panels>
__attribute__((target("avx2,fma"))) void Block256(const float* a, int64_t k, const float* panel,
                                                  float* out, int64_t n, int64_t cols) {
  constexpr int V = 4 * Panels;
  const int64_t panel_size = k * kPanel;
  __m256 acc[Rows][V];
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (int64_t p = 0; p < k; ++p) {
    __m256 b[V];
    for (int v = 0; v < V; ++v)
      b[v] = _mm256_loadu_ps(panel + (v / 4) * panel_size + p * kPanel + 8 * (v % 4));
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_set1_ps(a[r * k + p]);
      for (int v = 0; v < V; ++v) acc[r][v] = _mm256_fmadd_ps(x, b[v], acc[r][v]);
    }
  }
  alignas(32) float tail[8];
  for (int r = 0; r < Rows; ++r) {
    for (int v = 0; v < V; ++v) {
      const int64_t left = std::min<int64_t>(8, cols - 8 * v);
      if (left == 8) {
        _mm256_storeu_ps(out + r * n + 8 * v, acc[r][v]);
      } else if (left > 0) {
        _mm256_store_ps(tail, acc[r][v]);
        std::copy(tail, tail + left, out + r * n + 8 * v);
      }
    }
  }
}

// The sum of v's 16 lanes, pairwise (halves, then quarters, ...).
__attribute__((target("avx512f"))) inline float Sum512(__m512 v) {
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0x4E));
  v = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xB1));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4E));
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0xB1));
  return _mm512_cvtss_f32(v);
}

// out[0, Rows) = the first Rows rows of b (rows k long) · a: Rows independent chains of fused
// multiply-adds over k, 16 lanes each, each row's lanes added pairwise at the end.
template <int Rows>
__attribute__((target("avx512f"))) void Dots512(const float* b, int64_t k, const float* a,
                                                float* out) {
  const int64_t whole = k - k % 16;
  const __mmask16 tail = static_cast<__mmask16>((1u << (k % 16)) - 1);
  __m512 acc[Rows];
  for (int r = 0; r < Rows; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < whole; p += 16) {
    const __m512 x = _mm512_loadu_ps(a + p);
    for (int r = 0; r < Rows; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_loadu_ps(b + r * k + p), x, acc[r]);
  }
  if (tail != 0) {
    const __m512 x = _mm512_maskz_loadu_ps(tail, a + whole);
    for (int r = 0; r < Rows; ++r)
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(tail, b + r * k + whole), x, acc[r]);
  }
  for (int r = 0; r < Rows; ++r) out[r] = Sum512(acc[r]);
}

// The same with 8 lanes in AVX2 registers; the k % 8 last products are added in order after the
// lanes.
template <int Rows>
__attribute__((target("avx2,fma"))) void Dots256(const float* b, int64_t k, const float* a,
                                                 float* out) {
  const int64_t whole = k - k % 8;
  __m256 acc[Rows];
  for (int r = 0; r < Rows; ++r) acc[r] = _mm256_setzero_ps();
  for (int64_t p = 0; p < whole; p += 8) {
    const __m256 x = _mm256_loadu_ps(a + p);
    for (int r = 0; r < Rows; ++r)
      acc[r] = _mm256_fmadd_ps(_mm256_loadu_ps(b + r * k + p), x, acc[r]);
  }
  for (int r = 0; r < Rows; ++r) {
    const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[r]), _mm256_extractf128_ps(acc[r], 1));
    const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    float sum = _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
    for (int64_t p = whole; p < k; ++p) sum = std::fma(b[r * k + p], a[p], sum);
    out[r] = sum;
  }
}

// out[j] = b[j, :] · a for rows [first, last) of b, 8 rows at a time.
template <void (*Eight)(const float*, int64_t, const float*, float*),
          void (*One)(const float*, int64_t, const float*, float*)>
void MatVecRows(const float* b, int64_t k, const float* a, float* out, int64_t first,
                int64_t last) {
  int64_t j = first;
  for (; j + 8 <= last; j += 8) Eight(b + j * k, k, a, out + j);
  for (; j < last; ++j) One(b + j * k, k, a, out + j);
}

using MatVecFn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);

using BlockFn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);

// For each count of rows r (1 <= r <= rows), the block that takes r rows and the panels it takes,
// and the block for r rows and one panel, for the panels a wider block does not reach.
struct Kernels {
  int rows = 0;  // 0: no packed product (onnxruntime's Gemm serves)
  MatVecFn matvec = nullptr;
  BlockFn blocks[9] = {};
  int panels[9] = {};
  BlockFn narrow[9] = {};
};

Kernels Avx512() {
  Kernels k;
  k.rows = 8;
  k.matvec = MatVecRows<Dots512<8>, Dots512<1>>;
  const BlockFn fns[] = {nullptr,        Block512<1, 4>, Block512<2, 4>,
                         Block512<3, 2>, Block512<4, 2>, Block512<5, 1>,
                         Block512<6, 1>, Block512<7, 1>, Block512<8, 1>};
  const int panels[] = {0, 4, 4, 2, 2, 1, 1, 1, 1};
  const BlockFn narrow[] = {nullptr,        Block512<1, 1>, Block512<2, 1>,
                            Block512<3, 1>, Block512<4, 1>, Block512<5, 1>,
                            Block512<6, 1>, Block512<7, 1>, Block512<8, 1>};
  std::copy(fns, fns + 9, k.blocks);
  std::copy(panels, panels + 9, k.panels);
  std::copy(narrow, narrow + 9, k.narrow);
  return k;
}

Kernels Avx2() {
  Kernels k;
  k.rows = 3;
  k.matvec = MatVecRows<Dots256<8>, Dots256<1>>;
  const BlockFn fns[] = {nullptr, Block256<1, 2>, Block256<2, 1>, Block256<3, 1>};
  const int panels[] = {0, 2, 1, 1};
  const BlockFn narrow[] = {nullptr, Block256<1, 1>, Block256<2, 1>, Block256<3, 1>};
  std::copy(fns, fns + 4, k.blocks);
  std::copy(panels, panels + 4, k.panels);
  std::copy(narrow, narrow + 4, k.narrow);
  return k;
}

// The widest instruction set the CPU has, or the one ONNX_MASKED_RNN_KERNEL_PRODUCT names.
Kernels Select() {
  __builtin_cpu_init();
  const bool avx512 = __builtin_cpu_supports("avx512f");
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char* chosen = std::getenv(kProductVariable);
  const std::string choice = chosen != nullptr && *chosen != '\0' ? chosen : "auto";
  if (choice == "auto") return avx512 ? Avx512() : (avx2 ? Avx2() : Kernels{});
  if (choice == "runtime") return Kernels{};
  if ((choice == "avx512" && avx512) || (choice == "avx2" && avx2)) {
    return choice == "avx512" ? Avx512() : Avx2();
  }
  if (choice == "avx512" || choice == "avx2") {
    throw KernelError(ORT_INVALID_ARGUMENT, std::string(kProductVariable) + "=" + choice +
                                                ": this CPU does not have " + choice);
  }
  throw KernelError(ORT_INVALID_ARGUMENT, std::string(kProductVariable) + "=" + choice +
                                              ": not one of auto, avx512, avx2, runtime");
}

const Kernels& Chosen() {
  static const Kernels kernels = Select();
  return kernels;
}

}  // namespace
#pragma GCC diagnostic pop

bool PackedProduct::Available() { return Chosen().rows > 0; }

#else

bool PackedProduct::Available() {
  const char* chosen = std::getenv(kProductVariable);
  const std::string choice = chosen != nullptr && *chosen != '\0' ? chosen : "auto";
  if (choice == "auto" || choice == "runtime") return false;
  throw KernelError(ORT_INVALID_ARGUMENT, std::string(kProductVariable) + "=" + choice +
                                              ": no packed product in this build");
}

#endif

PackedProduct::PackedProduct(const float* b, int64_t n, int64_t k, const float* b2, int64_t k2)
    : b_(b), b2_(b2), n_(n), k1_(k), k_(k + k2), panels_((n + kPanel - 1) / kPanel) {}

void PackedProduct::Pack() {
  if (!packed_.empty()) return;
  packed_.assign(static_cast<size_t>(panels_ * k_ * kPanel), 0.0f);
  const int64_t k2 = k_ - k1_;
  for (int64_t j = 0; j < n_; ++j) {
    float* panel = &packed_[(j / kPanel) * k_ * kPanel + j % kPanel];
    for (int64_t p = 0; p < k1_; ++p) panel[p * kPanel] = b_[j * k1_ + p];
    for (int64_t p = 0; p < k2; ++p) panel[(k1_ + p) * kPanel] = b2_[j * k2 + p];
  }
}

void PackedProduct::Run(const float* a, int64_t m, float* out, int64_t panel_first,
                        int64_t panel_last) const {
#ifdef OMR_PACKED_X86
  const Kernels& kernels = Chosen();
  auto block = [&](BlockFn fn, int64_t i, int64_t q, int64_t panels) {
    fn(a + i * k_, k_, &packed_[q * k_ * kPanel], out + i * n_ + q * kPanel, n_,
       std::min(panels * kPanel, n_ - q * kPanel));
  };
  // Whole blocks of rows panel by panel, so that a panel stays in the L1 cache across them.
  const int64_t whole = m - m % kernels.rows;
  for (int64_t q = panel_first; q < panel_last && whole > 0; ++q) {
    for (int64_t i = 0; i < whole; i += kernels.rows) block(kernels.blocks[kernels.rows], i, q, 1);
  }
  if (whole == m) return;
  // The rows left, several panels at a time.
  const int rows = static_cast<int>(m - whole);
  const int wide = kernels.panels[rows];
  int64_t q = panel_first;
  for (; q + wide <= panel_last; q += wide) block(kernels.blocks[rows], whole, q, wide);
  for (; q < panel_last; ++q) block(kernels.narrow[rows], whole, q, 1);
#else
  (void)a, (void)m, (void)out, (void)panel_first, (void)panel_last;
#endif
}

void PackedProduct::MatVec(const float* b, int64_t k, const float* a, float* out, int64_t row_first,
                           int64_t row_last) {
#ifdef OMR_PACKED_X86
  Chosen().matvec(b, k, a, out, row_first, row_last);
#else
  (void)b, (void)k, (void)a, (void)out, (void)row_first, (void)row_last;
#endif
}

}  // namespace omr
