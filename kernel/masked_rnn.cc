#include "masked_rnn.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "activations.h"
#include "status.h"

namespace omr {

namespace {

// ---- float16 and bfloat16, which are computed in float32 (spec/semantics.md section 10) ----

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1F;
  const uint32_t mantissa = h & 0x3FF;
  uint32_t bits;
  if (exponent == 0) {
    float v = static_cast<float>(mantissa) * (1.0f / 16777216.0f);  // mantissa * 2^-24, exact
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  } else if (exponent == 31) {
    bits = sign | 0x7F800000 | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t FloatToHalf(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000);
  uint32_t a = x & 0x7FFFFFFF;
  if (a >= 0x7F800000) {  // infinity or NaN (kept quiet)
    return sign | 0x7C00 | (a > 0x7F800000 ? 0x200 | ((a >> 13) & 0x3FF) : 0);
  }
  if (a >= 0x477FF000) return sign | 0x7C00;  // >= 65520 rounds to infinity
  if (a < 0x38800000) {                       // below 2^-14: a subnormal half or zero
    float v;
    std::memcpy(&v, &a, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(v * 16777216.0f));
  }
  a += 0xFFF + ((a >> 13) & 1);
  a -= 112u << 23;
  return sign | static_cast<uint16_t>(a >> 13);
}

float BFloat16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

uint16_t FloatToBFloat16(float f) {  // round to nearest even
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7FFFFFFF) > 0x7F800000) return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7FFF + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

// ---- the float32 cells with the default activations, in vectorized passes over a row ----
//
// The same operations in the same order as the general code in Recur, so the results are the
// same bits, in loops compiled for the machine's widest vectors (the general code's glue loops
// are not). A pass per stage over a row in L1 beats one fused loop, which runs out of vector
// registers. `clip` is +infinity without the attribute (Clip(x, inf) is x, NaN included);
// `g` is scratch space of 5 * H.

OMR_VECTOR_CLONES void LstmRowDefault(const float* __restrict x, const float* __restrict r,
                                      const float* __restrict peep, float* __restrict c,
                                      float* __restrict h, int64_t H, float clip, bool coupled,
                                      float* __restrict g) {
  // g: i, o, f, c~ (x's order), then tanh(c)
  if (peep != nullptr) {
    for (int64_t j = 0; j < H; ++j) g[j] = Clip(x[j] + r[j] + peep[j] * c[j], clip);
    for (int64_t j = 0; j < H; ++j) g[j] = SigmoidF(g[j]);
    if (!coupled) {
      for (int64_t j = 2 * H; j < 3 * H; ++j) {
        g[j] = Clip(x[j] + r[j] + peep[j] * c[j - 2 * H], clip);
      }
      for (int64_t j = 2 * H; j < 3 * H; ++j) g[j] = SigmoidF(g[j]);
    }
  } else {
    const int64_t gates = coupled ? 2 * H : 3 * H;  // i, o (, f)
    for (int64_t j = 0; j < gates; ++j) g[j] = Clip(x[j] + r[j], clip);
    for (int64_t j = 0; j < gates; ++j) g[j] = SigmoidF(g[j]);
  }
  if (coupled) {
    for (int64_t j = 0; j < H; ++j) g[2 * H + j] = 1.0f - g[j];
  }
  for (int64_t j = 3 * H; j < 4 * H; ++j) g[j] = Clip(x[j] + r[j], clip);
  for (int64_t j = 3 * H; j < 4 * H; ++j) g[j] = TanhF(g[j]);
  for (int64_t j = 0; j < H; ++j) c[j] = g[2 * H + j] * c[j] + g[j] * g[3 * H + j];
  if (peep != nullptr) {
    for (int64_t j = H; j < 2 * H; ++j) g[j] = Clip(x[j] + r[j] + peep[j] * c[j - H], clip);
    for (int64_t j = H; j < 2 * H; ++j) g[j] = SigmoidF(g[j]);
  }
  for (int64_t j = 0; j < H; ++j) g[4 * H + j] = TanhF(c[j]);
  for (int64_t j = 0; j < H; ++j) h[j] = g[H + j] * g[4 * H + j];
}

// linear_before_reset: x (z, r, h), r: h·Rᵀ (z, r, h), rb: the recurrent bias of h; updates h.
OMR_VECTOR_CLONES void GruRowLinearDefault(const float* __restrict x, const float* __restrict r,
                                           const float* __restrict rb, float* __restrict h,
                                           int64_t H, float clip, float* __restrict g) {
  for (int64_t j = 0; j < 2 * H; ++j) g[j] = Clip(x[j] + r[j], clip);
  for (int64_t j = 0; j < 2 * H; ++j) g[j] = SigmoidF(g[j]);
  for (int64_t j = 0; j < H; ++j) {
    g[2 * H + j] = Clip(x[2 * H + j] + g[H + j] * (r[2 * H + j] + rb[j]), clip);
  }
  for (int64_t j = 2 * H; j < 3 * H; ++j) g[j] = TanhF(g[j]);
  for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - g[j]) * g[2 * H + j] + g[j] * h[j];
}

// Without linear_before_reset, first half: zr = (z, r) of the row, rh = r * h.
OMR_VECTOR_CLONES void GruGatesDefault(const float* __restrict x, const float* __restrict r,
                                       const float* __restrict h, float* __restrict zr,
                                       float* __restrict rh, int64_t H, float clip) {
  for (int64_t j = 0; j < 2 * H; ++j) zr[j] = Clip(x[j] + r[j], clip);
  for (int64_t j = 0; j < 2 * H; ++j) zr[j] = SigmoidF(zr[j]);
  for (int64_t j = 0; j < H; ++j) rh[j] = zr[H + j] * h[j];
}

// Second half: x: the row's X·Wᵀ + bias of h, rec_h: (r * h)·R_hᵀ; updates h.
OMR_VECTOR_CLONES void GruCandidateDefault(const float* __restrict x, const float* __restrict rec_h,
                                           const float* __restrict z, float* __restrict h,
                                           int64_t H, float clip, float* __restrict g) {
  for (int64_t j = 0; j < H; ++j) g[j] = Clip(x[j] + rec_h[j], clip);
  for (int64_t j = 0; j < H; ++j) g[j] = TanhF(g[j]);
  for (int64_t j = 0; j < H; ++j) h[j] = (1.0f - z[j]) * g[j] + z[j] * h[j];
}

OMR_VECTOR_CLONES void RnnRowDefault(const float* __restrict x, const float* __restrict r,
                                     float* __restrict h, int64_t H, float clip) {
  for (int64_t j = 0; j < H; ++j) h[j] = Clip(x[j] + r[j], clip);
  for (int64_t j = 0; j < H; ++j) h[j] = TanhF(h[j]);
}

// Whether a direction's activations are the defaults the rows above compute.
bool DefaultActivations(OpKind op, const std::vector<Activation>& acts) {
  auto is = [&](size_t i, ActivationKind kind) { return acts.size() > i && acts[i].kind == kind; };
  switch (op) {
    case OpKind::kLstm:
      return is(0, ActivationKind::kSigmoid) && is(1, ActivationKind::kTanh) &&
             is(2, ActivationKind::kTanh);
    case OpKind::kGru:
      return is(0, ActivationKind::kSigmoid) && is(1, ActivationKind::kTanh);
    case OpKind::kRnn:
      return is(0, ActivationKind::kTanh);
  }
  return false;
}

// ---- inputs and outputs ----

struct Input {
  const OrtValue* value = nullptr;  // nullptr: absent
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  const void* data = nullptr;

  int64_t size() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

Input ReadInput(const OrtKernelContext* context, size_t count, size_t index) {
  Input in;
  if (index >= count) return in;
  Check(ORT_CALL(KernelContext_GetInput, context, index, &in.value));
  if (in.value == nullptr) return in;
  OrtTensorTypeAndShapeInfo* info = nullptr;
  Check(ORT_CALL(GetTensorTypeAndShape, in.value, &info));
  size_t rank = 0;
  OrtStatus* status = ORT_CALL(GetTensorElementType, info, &in.type);
  if (status == nullptr) status = ORT_CALL(GetDimensionsCount, info, &rank);
  if (status == nullptr) {
    in.shape.resize(rank);
    status = ORT_CALL(GetDimensions, info, in.shape.data(), rank);
  }
  ORT_CALL(ReleaseTensorTypeAndShapeInfo, info);
  Check(status);
  void* data = nullptr;
  Check(ORT_CALL(GetTensorMutableData, const_cast<OrtValue*>(in.value), &data));
  in.data = data;
  return in;
}

template <class C>
std::vector<C> ToCompute(const Input& in, ONNXTensorElementDataType type) {
  std::vector<C> out(static_cast<size_t>(in.size()));
  const auto* raw = static_cast<const uint16_t*>(in.data);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ? HalfToFloat(raw[i])
                                                           : BFloat16ToFloat(raw[i]);
  }
  return out;
}

// One call's tensors in the compute type C, every optional one nullptr when absent.
template <class C>
struct Problem {
  int64_t T, N, I, H, D;
  const C* X;
  const C* W;
  const C* R;
  const C* B;
  const C* initial_h;
  const C* initial_c;
  const C* P;
  const uint8_t* mask;
  const int32_t* sequence_lens;
  C* Y;
  C* Y_h;
  C* Y_c;
};

// Runs body(first, last, scratch) over the rows [0, rows) in chunks of `per` rows, on the
// session's intra-op threads (without a thread pool onnxruntime runs them one after the
// other). A chunk's rows and scratch (scratch_size values, from `scratch`) are its own, so the
// results do not depend on the number of threads.
template <class C, class Body>
void ParallelRows(const OrtKernelContext* context, int64_t rows, int64_t per, C* scratch,
                  int64_t scratch_size, const Body& body) {
  const int64_t chunks = std::max<int64_t>(1, (rows + per - 1) / per);
  if (chunks <= 1) {
    body(int64_t{0}, rows, scratch);
    return;
  }
  struct Job {
    const Body* body;
    int64_t rows, per;
    C* scratch;
    int64_t scratch_size;
  } job{&body, rows, per, scratch, scratch_size};
  auto run = [](void* data, size_t index) {
    const Job& j = *static_cast<const Job*>(data);
    const int64_t first = static_cast<int64_t>(index) * j.per;
    (*j.body)(first, std::min(first + j.per, j.rows),
              j.scratch + static_cast<int64_t>(index) * j.scratch_size);
  };
  Check(ORT_CALL(KernelContext_ParallelFor, context, run, static_cast<size_t>(chunks), 0, &job));
}

// Rows per chunk of a step's cells alone: about kChunkValues values of h.
constexpr int64_t kChunkValues = 1024;

inline int64_t RowsPerChunk(int64_t H) {
  return std::max<int64_t>(1, kChunkValues / std::max<int64_t>(H, 1));
}

// Rows per range of the batch that runs through every step on one thread: whole blocks of 8 rows
// (the packed product's), at most kRowRanges ranges (each reads all the weights at every step).
constexpr int64_t kRowRanges = 8;

inline int64_t RowsPerRange(int64_t rows) {
  const int64_t blocks = (rows + 7) / 8;
  return 8 * ((blocks + kRowRanges - 1) / kRowRanges);
}

// Runs every direction of the masked recurrence (spec/semantics.md section 3).
template <class C>
void Recur(const Attributes& attrs, const Gemm<C>& gemm, const OrtKernelContext* context,
           const Problem<C>& p) {
  const int64_t T = p.T, N = p.N, I = p.I, H = p.H, D = p.D;
  const int64_t G = NumGates(attrs.op), GH = G * H;
  const bool layout1 = attrs.layout == 1;
  const bool lstm = attrs.op == OpKind::kLstm, gru = attrs.op == OpKind::kGru;
  const bool lbr = gru && attrs.linear_before_reset;
  const C clip = static_cast<C>(attrs.clip);
  auto clipped = [&](C x) { return attrs.has_clip ? Clip(x, clip) : x; };
  const float clip_bound = attrs.has_clip ? attrs.clip : INFINITY;

  // The effective mask m[t, b] = mask[t, b] and t < sequence_lens[b], time-major.
  std::vector<uint8_t> m(static_cast<size_t>(T * N), 1);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t b = 0; b < N; ++b) {
      bool on = p.mask == nullptr || p.mask[layout1 ? b * T + t : t * N + b] != 0;
      if (p.sequence_lens != nullptr && t >= p.sequence_lens[b]) on = false;
      m[t * N + b] = on;
    }
  }

  // With the packed product, LSTM and RNN with the default activations compute each step's gates
  // as one product of the rows [x_t | h] and [W | R] (`joined`), which keeps X · Wᵀ in cache.
  // Otherwise a direction's input projections X · Wᵀ are products of their own, of the rows of X
  // the mask keeps (`project`; the bias is added at each step). (Unbounded activations can make a
  // recurrence amplify a rounding: they keep the order of the reference's sums.)
  bool joined = std::is_same_v<C, float> && !gru && N > 1 && H > 0 && PackedProduct::Available();
  for (int64_t d = 0; d < D; ++d) {
    joined = joined && DefaultActivations(attrs.op, attrs.activations[d]);
  }
  std::vector<C> bias(static_cast<size_t>(D * GH), C(0));
  if (p.B != nullptr) {
    for (int64_t d = 0; d < D; ++d) {
      const C* wb = p.B + d * 2 * GH;
      const C* rb = wb + GH;
      for (int64_t j = 0; j < GH; ++j) {
        bias[d * GH + j] = lbr && j >= 2 * H ? wb[j] : wb[j] + rb[j];
      }
    }
  }
  auto x_row = [&](int64_t t, int64_t b) { return layout1 ? b * T + t : t * N + b; };
  // The steps whose projections are made at once: all of them when ranges of rows run apart (see
  // run_rows), kProjectedSteps at a time otherwise, which bounds the memory they take.
  constexpr int64_t kProjectedSteps = 64;
  std::vector<int64_t> slot(joined ? 0 : static_cast<size_t>(T * N), -1);
  std::vector<C> xw;
  // X · W_dᵀ of the kept rows of X at the steps [s0, s1) of direction d's order into xw, each at
  // xw[slot[row of X] * G*H].
  auto project = [&](int64_t d, bool reverse, int64_t s0, int64_t s1) {
    int64_t k = 0;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      for (int64_t b = 0; b < N; ++b) k += m[t * N + b];
    }
    std::vector<C> kept(static_cast<size_t>(k * I));
    xw.resize(static_cast<size_t>(k * GH));
    k = 0;
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t t = reverse ? T - 1 - s : s;
      for (int64_t b = 0; b < N; ++b) {
        if (!m[t * N + b]) continue;
        std::memcpy(&kept[k * I], p.X + x_row(t, b) * I, sizeof(C) * I);
        slot[x_row(t, b)] = k++;
      }
    }
    gemm.Run(context, kept.data(), k, I, p.W + d * GH * I, GH, nullptr, xw.data());
  };

  std::vector<C> h(static_cast<size_t>(N * H)), c(lstm ? static_cast<size_t>(N * H) : 0);
  // gathered: the rows entering a step's product (joined: [x_t | h], I + H long; else h).
  const int64_t gathered_k = joined ? I + H : H;
  std::vector<C> gathered(static_cast<size_t>(N * gathered_k)), rec(static_cast<size_t>(N * GH));
  std::vector<C> zr(gru ? static_cast<size_t>(2 * N * H) : 0), rh(gru ? N * H : 0);
  std::vector<C> rec_h(gru ? static_cast<size_t>(N * H) : 0);
  const int64_t max_chunks = std::max((N + RowsPerChunk(H) - 1) / RowsPerChunk(H), kRowRanges);
  std::vector<C> gates(static_cast<size_t>(max_chunks * 5 * H));
  std::vector<C> zeros(static_cast<size_t>(3 * H), C(0));
  std::vector<int64_t> active(static_cast<size_t>(N));
  std::vector<uint8_t> seen(static_cast<size_t>(N));
  const int64_t first = gru && !lbr ? 2 * H : GH;  // GRU without lbr: z and r first

  for (int64_t d = 0; d < D; ++d) {
    const bool reverse = attrs.reverse || d == 1;
    const std::vector<Activation>& acts = attrs.activations[d];
    const bool fast = std::is_same_v<C, float> && DefaultActivations(attrs.op, acts);
    const C* R = p.R + d * GH * H;
    const C* peep = p.P != nullptr ? p.P + d * 3 * H : zeros.data();
    const C* Rb_h = p.B != nullptr ? p.B + d * 2 * GH + GH + 2 * H : zeros.data();
    // The recurrent products: of every row (h), of the rows gathered, of GRU's r * h.
    typename Gemm<C>::Repeated rec_all(gemm, h.data(), N, H, R, first, rec.data());
    typename Gemm<C>::Repeated rec_some(gemm, gathered.data(), N, H, R, first, rec.data(),
                                        &rec_all);
    std::unique_ptr<typename Gemm<C>::Repeated> rec_reset;
    if (gru && !lbr) {
      rec_reset = std::make_unique<typename Gemm<C>::Repeated>(gemm, rh.data(), N, H, R + 2 * H * H,
                                                               H, rec_h.data());
    }
    // joined: the product of [x_t | h] and [W | R] (n = G*H, k = I + H).
    std::unique_ptr<PackedProduct> joined_product;
    if constexpr (std::is_same_v<C, float>) {
      if (joined) joined_product = std::make_unique<PackedProduct>(p.W + d * GH * I, GH, I, R, H);
    }
    auto state_at = [&](int64_t b) { return (layout1 ? b * D + d : d * N + b) * H; };
    for (int64_t b = 0; b < N; ++b) {
      for (int64_t j = 0; j < H; ++j) {
        h[b * H + j] = p.initial_h != nullptr ? p.initial_h[state_at(b) + j] : C(0);
        if (lstm) c[b * H + j] = p.initial_c != nullptr ? p.initial_c[state_at(b) + j] : C(0);
      }
      seen[b] = 0;
    }
    auto xw_at = [&](int64_t t, int64_t b) -> C* {
      const int64_t row = x_row(t, b);
      return xw.data() + slot[row] * GH;
    };
    // The bias joins X · Wᵀ in the first pass over a row, while it is in cache, rather than as a
    // pass of onnxruntime's Gemm over the whole product of the kept rows: the same sum.
    auto biased = [&](int64_t t, int64_t b) -> const C* {
      if (joined) return &bias[d * GH];  // X · Wᵀ is in the recurrent product
      C* x = xw_at(t, b);
      const C* xb = &bias[d * GH];
      for (int64_t j = 0; j < GH; ++j) x[j] += xb[j];
      return x;
    };
    // The cells at step t of the rows active[i0..i1), from their recurrent products in rec's rows
    // i0..i1, with `g` as scratch (5 * H values of the caller's own).
    auto lstm_rows = [&](int64_t t, int64_t i0, int64_t i1, C* g) {
      C* gi = g;
      C* go = gi + H;
      C* gf = go + H;
      C* gc = gf + H;
      C* ht = gc + H;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = active[i];
        const C* x = biased(t, b);
        const C* r = rec.data() + i * GH;
        C* cb = &c[b * H];
        if constexpr (std::is_same_v<C, float>) {
          if (fast) {
            LstmRowDefault(x, r, p.P != nullptr ? peep : nullptr, cb, &h[b * H], H, clip_bound,
                           attrs.input_forget, g);
            continue;
          }
        }
        for (int64_t j = 0; j < H; ++j) gi[j] = clipped(x[j] + r[j] + peep[j] * cb[j]);
        Apply(acts[0], gi, H);
        if (attrs.input_forget) {
          for (int64_t j = 0; j < H; ++j) gf[j] = C(1) - gi[j];
        } else {
          for (int64_t j = 0; j < H; ++j) {
            gf[j] = clipped(x[2 * H + j] + r[2 * H + j] + peep[2 * H + j] * cb[j]);
          }
          Apply(acts[0], gf, H);
        }
        for (int64_t j = 0; j < H; ++j) gc[j] = clipped(x[3 * H + j] + r[3 * H + j]);
        Apply(acts[1], gc, H);
        for (int64_t j = 0; j < H; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
        for (int64_t j = 0; j < H; ++j) go[j] = clipped(x[H + j] + r[H + j] + peep[H + j] * cb[j]);
        Apply(acts[0], go, H);
        std::memcpy(ht, cb, sizeof(C) * H);
        Apply(acts[2], ht, H);
        C* hb = &h[b * H];
        for (int64_t j = 0; j < H; ++j) hb[j] = go[j] * ht[j];
      }
    };
    // GRU: z and r (and r * h without linear_before_reset); with it and the default activations,
    // the whole cell.
    const int64_t stride = first;
    auto gru_gates = [&](int64_t t, int64_t i0, int64_t i1, C* g) {
      for (int64_t i = i0; i < i1; ++i) {
        const C* x = biased(t, active[i]);
        const C* r = rec.data() + i * stride;
        C* z = &zr[i * 2 * H];
        if constexpr (std::is_same_v<C, float>) {
          if (fast && lbr) {
            GruRowLinearDefault(x, r, Rb_h, &h[active[i] * H], H, clip_bound, g);
            continue;
          }
          if (fast) {
            GruGatesDefault(x, r, &h[active[i] * H], z, &rh[i * H], H, clip_bound);
            continue;
          }
        }
        for (int64_t j = 0; j < 2 * H; ++j) z[j] = clipped(x[j] + r[j]);
        Apply(acts[0], z, 2 * H);
        if (!lbr) {
          const C* hb = &h[active[i] * H];
          for (int64_t j = 0; j < H; ++j) rh[i * H + j] = z[H + j] * hb[j];
        }
      }
    };
    auto gru_candidate = [&](int64_t t, int64_t i0, int64_t i1, C* g) {
      C* cand = g;
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = active[i];
        const C* x = xw_at(t, b) + 2 * H;
        const C* z = &zr[i * 2 * H];
        const C* rg = z + H;
        if constexpr (std::is_same_v<C, float>) {
          if (fast) {
            GruCandidateDefault(x, &rec_h[i * H], z, &h[b * H], H, clip_bound, g);
            continue;
          }
        }
        if (lbr) {
          const C* r = rec.data() + i * GH + 2 * H;
          for (int64_t j = 0; j < H; ++j) {
            cand[j] = clipped(x[j] + rg[j] * (r[j] + Rb_h[j]));
          }
        } else {
          const C* r = &rec_h[i * H];
          for (int64_t j = 0; j < H; ++j) cand[j] = clipped(x[j] + r[j]);
        }
        Apply(acts[1], cand, H);
        C* hb = &h[b * H];
        for (int64_t j = 0; j < H; ++j) hb[j] = (C(1) - z[j]) * cand[j] + z[j] * hb[j];
      }
    };
    auto rnn_rows = [&](int64_t t, int64_t i0, int64_t i1, C*) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t b = active[i];
        const C* x = biased(t, b);
        const C* r = rec.data() + i * H;
        C* hb = &h[b * H];
        if constexpr (std::is_same_v<C, float>) {
          if (fast) {
            RnnRowDefault(x, r, hb, H, clip_bound);
            continue;
          }
        }
        for (int64_t j = 0; j < H; ++j) hb[j] = clipped(x[j] + r[j]);
        Apply(acts[0], hb, H);
      }
    };
    // Every step for the rows [b0, b1) of the batch, with g as scratch. A row's recurrence reads no
    // other row, and every buffer indexed by a row's place in `active` is used at the places
    // [b0, b1) only, so ranges of rows run apart. `pooled` (the whole batch): each step's products
    // and cells use the session's threads; otherwise the range runs on the calling thread, which
    // needs the packed product.
    auto run_rows = [&](int64_t b0, int64_t b1, C* g, bool pooled) {
      for (int64_t s = 0; s < T; ++s) {
        const int64_t t = reverse ? T - 1 - s : s;
        if (pooled && !joined && s % kProjectedSteps == 0) {
          project(d, reverse, s, std::min(s + kProjectedSteps, T));
        }
        int64_t na = 0;
        for (int64_t b = b0; b < b1; ++b) {
          if (m[t * N + b]) active[b0 + na++] = b;
        }
        const int64_t i0 = b0, i1 = b0 + na;
        // Only the rows processed at this step enter the recurrent product.
        const bool some = na < b1 - b0;
        if (joined) {
          for (int64_t i = i0; i < i1; ++i) {
            C* row = &gathered[i * (I + H)];
            std::memcpy(row, p.X + x_row(t, active[i]) * I, sizeof(C) * I);
            std::memcpy(row + I, &h[active[i] * H], sizeof(C) * H);
          }
        } else if (some) {
          for (int64_t i = i0; i < i1; ++i) {
            std::memcpy(&gathered[i * H], &h[active[i] * H], sizeof(C) * H);
          }
        }
        if (na > 0 && joined) {
          if constexpr (std::is_same_v<C, float>) {
            joined_product->Run(&gathered[i0 * (I + H)], na, &rec[i0 * GH], 0,
                                joined_product->panels());
          }
          if (lstm) {
            lstm_rows(t, i0, i1, g);
          } else {
            rnn_rows(t, i0, i1, g);
          }
        } else if (na > 0 && !pooled) {
          rec_all.RunRows(some ? gathered.data() : h.data(), i0, i1);
          if (lstm) {
            lstm_rows(t, i0, i1, g);
          } else if (gru) {
            gru_gates(t, i0, i1, g);
            if (!lbr) rec_reset->RunRows(rh.data(), i0, i1);
            if (!(fast && lbr)) gru_candidate(t, i0, i1, g);
          } else {
            rnn_rows(t, i0, i1, g);
          }
        } else if (na > 0) {
          (some ? rec_some : rec_all).Run(context, na);
          auto cells = [&](const auto& rows) {
            ParallelRows(context, na, RowsPerChunk(H), g, 5 * H,
                         [&](int64_t r0, int64_t r1, C* rg) { rows(t, r0, r1, rg); });
          };
          if (lstm) {
            cells(lstm_rows);
          } else if (gru) {
            cells(gru_gates);
            if (!lbr) rec_reset->Run(context, na);
            if (!(fast && lbr)) cells(gru_candidate);
          } else {
            cells(rnn_rows);
          }
        }
        for (int64_t b = b0; b < b1; ++b) {
          const bool on = m[t * N + b] != 0;
          if (on) seen[b] = 1;
          if (p.Y == nullptr) continue;
          C* y = p.Y + (layout1 ? (b * T + t) * D + d : (t * D + d) * N + b) * H;
          if (on || (attrs.carry && seen[b])) {
            std::memcpy(y, &h[b * H], sizeof(C) * H);
          } else {
            for (int64_t j = 0; j < H; ++j) y[j] = C(0);
          }
        }
      }
    };
    if ((joined || rec_all.packed()) && N > 1) {
      // Ranges of rows on the session's threads, each through every step: one pass over the
      // thread pool per direction (onnxruntime's LSTM parallelises its batch the same way).
      if (joined_product != nullptr) {
        joined_product->Pack();
      } else {
        project(d, reverse, 0, T);
        rec_all.Prepare();
        if (rec_reset != nullptr) rec_reset->Prepare();
      }
      ParallelRows(context, N, RowsPerRange(N), gates.data(), 5 * H,
                   [&](int64_t b0, int64_t b1, C* g) { run_rows(b0, b1, g, false); });
    } else {
      run_rows(0, N, gates.data(), true);
    }
    for (int64_t b = 0; b < N; ++b) {
      if (p.Y_h != nullptr) std::memcpy(p.Y_h + state_at(b), &h[b * H], sizeof(C) * H);
      if (p.Y_c != nullptr) std::memcpy(p.Y_c + state_at(b), &c[b * H], sizeof(C) * H);
    }
  }
}

const char* TypeName(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return "double";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return "bool";
    default:
      return "another type";
  }
}

}  // namespace

MaskedRnnKernel::MaskedRnnKernel(OpKind op, ONNXTensorElementDataType type,
                                 const OrtKernelInfo* info)
    : attrs_(ReadAttributes(op, info)), type_(type) {
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
    gemm_double_ = std::make_unique<Gemm<double>>(info);
  } else {
    gemm_float_ = std::make_unique<Gemm<float>>(info);
  }
}

void MaskedRnnKernel::Compute(OrtKernelContext* context) const {
  const Attributes& a = attrs_;
  const std::string op = OpName(a.op);
  auto fail = [&](const std::string& what) {
    throw KernelError(ORT_INVALID_ARGUMENT, op + ": " + what);
  };
  const bool lstm = a.op == OpKind::kLstm;
  // Input positions: X W R B sequence_lens initial_h [initial_c P] mask.
  const char* names[] = {"X",         "W",         "R", "B",   "sequence_lens",
                         "initial_h", "initial_c", "P", "mask"};
  const size_t mask_index = lstm ? 8 : 6;
  size_t count = 0;
  Check(ORT_CALL(KernelContext_GetInputCount, context, &count));
  std::vector<Input> in(9);
  for (size_t i = 0; i <= mask_index; ++i) {
    size_t slot = !lstm && i == 6 ? 8 : i;  // GRU/RNN: mask at 6
    in[slot] = ReadInput(context, count, i);
  }
  const Input &X = in[0], &W = in[1], &R = in[2], &B = in[3], &seq = in[4];
  const Input &init_h = in[5], &init_c = in[6], &P = in[7], &mask = in[8];
  for (const char* name : {"X", "W", "R"}) {
    size_t i = name[0] == 'X' ? 0 : name[0] == 'W' ? 1 : 2;
    if (in[i].value == nullptr) fail(std::string("input '") + name + "' is required");
  }
  for (size_t i : {0, 1, 2, 3, 5, 6, 7}) {
    if (in[i].value != nullptr && in[i].type != type_) {
      fail(std::string("input '") + names[i] + "' must have the type of X (" + TypeName(type_) +
           "), got " + TypeName(in[i].type));
    }
  }
  if (seq.value != nullptr && seq.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) {
    fail(std::string("input 'sequence_lens' must be an int32 tensor, got ") + TypeName(seq.type));
  }
  if (mask.value != nullptr && mask.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) {
    fail(std::string("input 'mask' must be a bool tensor, got ") + TypeName(mask.type));
  }

  // Shapes, as onnx_masked_rnn.attributes.infer_shapes checks them.
  auto rank = [&](const Input& t, const char* name, size_t r) {
    if (t.value != nullptr && t.shape.size() != r) {
      fail(std::string("input '") + name + "' must have rank " + std::to_string(r) +
           ", got shape " + ShapeText(t.shape));
    }
  };
  auto expect = [&](const char* name, int axis, int64_t actual, int64_t wanted,
                    const std::string& what) {
    if (actual != wanted) {
      fail(std::string("input '") + name + "' has size " + std::to_string(actual) + " on axis " +
           std::to_string(axis) + ", expected " + std::to_string(wanted) + " (" + what + ")");
    }
  };
  rank(X, "X", 3);
  rank(W, "W", 3);
  rank(R, "R", 3);
  const int64_t D = a.num_directions, G = NumGates(a.op);
  const int64_t T = a.layout ? X.shape[1] : X.shape[0];
  const int64_t N = a.layout ? X.shape[0] : X.shape[1];
  const int64_t I = X.shape[2];
  const std::string dir_what = std::string("num_directions of direction='") +
                               (D == 2      ? "bidirectional"
                                : a.reverse ? "reverse"
                                            : "forward") +
                               "'";
  expect("R", 0, R.shape[0], D, dir_what);
  const int64_t H = a.hidden_size > 0 ? a.hidden_size : R.shape[2];
  const std::string gates_what = std::to_string(G) + " gates x hidden_size";
  expect("R", 2, R.shape[2], H, "hidden_size");
  expect("R", 1, R.shape[1], G * H, gates_what);
  expect("W", 0, W.shape[0], D, dir_what);
  expect("W", 2, W.shape[2], I, "input_size, the last axis of X");
  expect("W", 1, W.shape[1], G * H, gates_what);
  rank(B, "B", 2);
  if (B.value != nullptr) {
    expect("B", 0, B.shape[0], D, "num_directions");
    expect("B", 1, B.shape[1], 2 * G * H, "2 x " + gates_what);
  }
  rank(seq, "sequence_lens", 1);
  if (seq.value != nullptr) expect("sequence_lens", 0, seq.shape[0], N, "batch_size");
  const std::vector<int64_t> state_shape =
      a.layout ? std::vector<int64_t>{N, D, H} : std::vector<int64_t>{D, N, H};
  const char* state_what[3] = {"num_directions", "batch_size", "hidden_size"};
  if (a.layout) std::swap(state_what[0], state_what[1]);
  for (size_t i : {5, 6}) {
    if (i == 6 && !lstm) continue;
    rank(in[i], names[i], 3);
    if (in[i].value == nullptr) continue;
    for (int axis = 0; axis < 3; ++axis) {
      expect(names[i], axis, in[i].shape[axis], state_shape[axis], state_what[axis]);
    }
  }
  if (lstm) {
    rank(P, "P", 2);
    if (P.value != nullptr) {
      expect("P", 0, P.shape[0], D, "num_directions");
      expect("P", 1, P.shape[1], 3 * H, "3 x hidden_size");
    }
  }
  rank(mask, "mask", 2);
  if (mask.value != nullptr) {
    const std::vector<int64_t> want =
        a.layout ? std::vector<int64_t>{N, T} : std::vector<int64_t>{T, N};
    if (mask.shape != want) {
      fail(std::string("input 'mask' must have the shape of the first two axes of X ") +
           (a.layout ? "[batch_size, seq_length]" : "[seq_length, batch_size]") + " = " +
           ShapeText(want) + ", got " + ShapeText(mask.shape));
    }
  }
  const auto* seq_lens = static_cast<const int32_t*>(seq.data);
  if (seq.value != nullptr) {
    for (int64_t b = 0; b < N; ++b) {
      if (seq_lens[b] < 0 || seq_lens[b] > T) {
        std::string values = "[";
        for (int64_t k = 0; k < N; ++k) values += (k ? ", " : "") + std::to_string(seq_lens[k]);
        fail("input 'sequence_lens' must lie in [0, seq_length=" + std::to_string(T) + "], got " +
             values + "]");
      }
    }
  }

  // Outputs (each may be absent).
  size_t outputs = 0;
  Check(ORT_CALL(KernelContext_GetOutputCount, context, &outputs));
  const std::vector<int64_t> y_shape =
      a.layout ? std::vector<int64_t>{N, T, D, H} : std::vector<int64_t>{T, D, N, H};
  void* out_data[3] = {nullptr, nullptr, nullptr};
  for (size_t i = 0; i < (lstm ? 3u : 2u) && i < outputs; ++i) {
    const std::vector<int64_t>& shape = i == 0 ? y_shape : state_shape;
    OrtValue* value = nullptr;
    Check(ORT_CALL(KernelContext_GetOutput, context, i, shape.data(), shape.size(), &value));
    if (value != nullptr) Check(ORT_CALL(GetTensorMutableData, value, &out_data[i]));
  }
  const int64_t out_sizes[3] = {T * D * N * H, D * N * H, D * N * H};

  if (type_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT ||
      type_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE) {
    auto run = [&](auto zero, const auto& gemm) {
      using C = decltype(zero);
      Problem<C> p{T,
                   N,
                   I,
                   H,
                   D,
                   static_cast<const C*>(X.data),
                   static_cast<const C*>(W.data),
                   static_cast<const C*>(R.data),
                   static_cast<const C*>(B.data),
                   static_cast<const C*>(init_h.data),
                   static_cast<const C*>(init_c.data),
                   static_cast<const C*>(P.data),
                   static_cast<const uint8_t*>(mask.data),
                   seq_lens,
                   static_cast<C*>(out_data[0]),
                   static_cast<C*>(out_data[1]),
                   static_cast<C*>(out_data[2])};
      Recur<C>(a, gemm, context, p);
    };
    if (type_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
      run(0.0f, *gemm_float_);
    } else {
      run(0.0, *gemm_double_);
    }
    return;
  }

  // float16 and bfloat16: in float32, rounded to the type at the end.
  auto convert = [&](const Input& t) {
    return t.value != nullptr ? ToCompute<float>(t, type_) : std::vector<float>();
  };
  auto ptr = [](const std::vector<float>& v, const Input& t) {
    return t.value != nullptr ? v.data() : nullptr;
  };
  std::vector<float> x = convert(X), w = convert(W), r = convert(R), bb = convert(B);
  std::vector<float> ih = convert(init_h), ic = convert(init_c), pp = convert(P);
  std::vector<float> results[3];
  for (int i = 0; i < 3; ++i) {
    if (out_data[i] != nullptr) results[i].resize(static_cast<size_t>(out_sizes[i]));
  }
  auto out_ptr = [&](int i) { return out_data[i] != nullptr ? results[i].data() : nullptr; };
  Problem<float> p{T,
                   N,
                   I,
                   H,
                   D,
                   x.data(),
                   w.data(),
                   r.data(),
                   ptr(bb, B),
                   ptr(ih, init_h),
                   ptr(ic, init_c),
                   ptr(pp, P),
                   static_cast<const uint8_t*>(mask.data),
                   seq_lens,
                   out_ptr(0),
                   out_ptr(1),
                   out_ptr(2)};
  Recur<float>(a, *gemm_float_, context, p);
  for (int i = 0; i < 3; ++i) {
    if (out_data[i] == nullptr) continue;
    auto* dst = static_cast<uint16_t*>(out_data[i]);
    for (size_t k = 0; k < results[i].size(); ++k) {
      dst[k] = type_ == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16 ? FloatToHalf(results[i][k])
                                                              : FloatToBFloat16(results[i][k]);
    }
  }
}

}  // namespace omr
