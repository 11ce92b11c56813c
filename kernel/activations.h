// The activation functions of spec/semantics.md section 9 applied to a vector in place, and clip.
//
// Sigmoid and Tanh in float32 are the hot path of every cell: they are computed here by
// branch-free code the compiler vectorizes (AVX-512 and AVX2 clones on x86-64), within a few
// float32 ulps of the exact function, with IEEE behaviour at the edges (NaN stays NaN, +-inf gives
// the limits, and where the reference's float32 exp overflows the result is the reference's).
// Every other function, and every float64 one, is the C library's.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "attributes.h"

namespace omr {

// The polynomials are written with std::fma, which is exactly rounded on every machine: the
// AVX-512 and FMA clones compute it in one instruction, the default clone calls the C library, so
// every clone gives the same bits. (An "avx2" clone would be chosen before "fma" and lack it.)
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define OMR_VECTOR_CLONES __attribute__((target_clones("avx512f", "fma", "default")))
#else
#define OMR_VECTOR_CLONES
#endif

// The scalar functions below are inlined into every clone, where they vectorize.
#if defined(__GNUC__)
#define OMR_INLINE inline __attribute__((always_inline))
#else
#define OMR_INLINE inline
#endif

template <class C>
inline C Clip(C x, C bound) {
  return x < -bound ? -bound : (x > bound ? bound : x);  // NaN passes through
}

// exp(x) for x in [-87, 88] (the caller bounds it): x = n ln2 + r with |r| <= ln2/2, exp(r) by its
// Taylor series to r^7 (relative error below 1e-8), 2^n written into the exponent bits. NaN stays
// NaN.
OMR_INLINE float ExpBounded(float x) {
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float t = std::fma(x, 1.44269504f, shifter);
  const float n = t - shifter;
  const float r = std::fma(n, -1.428606765330187e-06f, std::fma(n, -0.693145751953125f, x));
  float p = 1.0f / 5040.0f;
  p = std::fma(p, r, 1.0f / 720.0f);
  p = std::fma(p, r, 1.0f / 120.0f);
  p = std::fma(p, r, 1.0f / 24.0f);
  p = std::fma(p, r, 1.0f / 6.0f);
  p = std::fma(p, r, 0.5f);
  p = std::fma(p, r, 1.0f);
  p = std::fma(p, r, 1.0f);
  uint32_t bits;
  std::memcpy(&bits, &t, 4);
  bits = (bits + 127) << 23;  // the low bits of t hold n
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

OMR_INLINE float SigmoidF(float x) {
  const float minus = -x;
  const float e = ExpBounded(minus > 88.0f ? 88.0f : (minus < -87.0f ? -87.0f : minus));
  // The reference's float32 exp(-x) is infinite beyond 88.72: its sigmoid is then 0.
  return minus > 88.72283f ? 0.0f : 1.0f / (1.0f + e);
}

OMR_INLINE float TanhF(float x) {
  const float a = std::fabs(x);
  // |x| < 0.55: the odd Taylor series to x^17 (error below 3e-9); otherwise 1 - 2 / (e^2|x| + 1),
  // which is 1 in float32 from |x| = 10 on.
  const float x2 = x * x;
  float p = 6404582.0f / 10854718875.0f;
  p = std::fma(p, x2, -929569.0f / 638512875.0f);
  p = std::fma(p, x2, 21844.0f / 6081075.0f);
  p = std::fma(p, x2, -1382.0f / 155925.0f);
  p = std::fma(p, x2, 62.0f / 2835.0f);
  p = std::fma(p, x2, -17.0f / 315.0f);
  p = std::fma(p, x2, 2.0f / 15.0f);
  p = std::fma(p, x2, -1.0f / 3.0f);
  const float small = std::fma(x * x2, p, x);
  const float e = ExpBounded(2.0f * (a > 10.0f ? 10.0f : a));
  const float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.55f ? small : big;
}

OMR_VECTOR_CLONES inline void SigmoidInPlace(float* __restrict v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) v[j] = SigmoidF(v[j]);
}

OMR_VECTOR_CLONES inline void TanhInPlace(float* __restrict v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) v[j] = TanhF(v[j]);
}

OMR_VECTOR_CLONES inline void ScaledTanhInPlace(float* __restrict v, int64_t n, float alpha,
                                                float beta) {
  for (int64_t j = 0; j < n; ++j) v[j] = alpha * TanhF(beta * v[j]);
}

inline void SigmoidInPlace(double* v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) v[j] = 1.0 / (1.0 + std::exp(-v[j]));
}

inline void TanhInPlace(double* v, int64_t n) {
  for (int64_t j = 0; j < n; ++j) v[j] = std::tanh(v[j]);
}

inline void ScaledTanhInPlace(double* v, int64_t n, double alpha, double beta) {
  for (int64_t j = 0; j < n; ++j) v[j] = alpha * std::tanh(beta * v[j]);
}

// Applies `act` to v[0..n), as the reference's _ACTIVATION_FUNCTIONS define each function.
template <class C>
void Apply(const Activation& act, C* v, int64_t n) {
  const C alpha = static_cast<C>(act.alpha);
  const C beta = static_cast<C>(act.beta);
  switch (act.kind) {
    case ActivationKind::kRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] < 0 ? C(0) : v[j];
      break;
    case ActivationKind::kTanh:
      TanhInPlace(v, n);
      break;
    case ActivationKind::kSigmoid:
      SigmoidInPlace(v, n);
      break;
    case ActivationKind::kAffine:
      for (int64_t j = 0; j < n; ++j) v[j] = alpha * v[j] + beta;
      break;
    case ActivationKind::kLeakyRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= 0 ? v[j] : alpha * v[j];
      break;
    case ActivationKind::kThresholdedRelu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] > alpha ? v[j] : C(0);
      break;
    case ActivationKind::kScaledTanh:
      ScaledTanhInPlace(v, n, alpha, beta);
      break;
    case ActivationKind::kHardSigmoid:
      for (int64_t j = 0; j < n; ++j) {
        C y = alpha * v[j] + beta;
        v[j] = y < 0 ? C(0) : (y > 1 ? C(1) : y);
      }
      break;
    case ActivationKind::kElu:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] >= 0 ? v[j] : alpha * (std::exp(v[j]) - C(1));
      break;
    case ActivationKind::kSoftsign:
      for (int64_t j = 0; j < n; ++j) v[j] = v[j] / (C(1) + std::fabs(v[j]));
      break;
    case ActivationKind::kSoftplus:
      for (int64_t j = 0; j < n; ++j) {
        C x = v[j];
        v[j] = (x < 0 ? C(0) : x) + std::log(C(1) + std::exp(-std::fabs(x)));
      }
      break;
  }
}

}  // namespace omr
