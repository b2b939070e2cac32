// Internal SIMD helpers (GCC/Clang vector extensions): 8 float32 lanes or 4 float64 lanes, i.e. one AVX
// register, or two SSE registers in the baseline build. Include only from .cc files whose hot functions are
// built with target_clones; every helper is always inlined, so no 32-byte vector crosses a call boundary and
// GCC's note about the AVX calling convention (-Wpsabi) does not apply. GCC issues that note where the
// helpers are inlined, so including this header turns -Wpsabi off for the rest of the translation unit.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "posenc/kernels/exp_kernel.h"

#pragma GCC diagnostic ignored "-Wpsabi"

namespace posenc::simd {

typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef double D4 __attribute__((vector_size(32)));
typedef int64_t L4 __attribute__((vector_size(32)));

#define POSENC_SIMD_INLINE [[gnu::always_inline]] inline

POSENC_SIMD_INLINE F8 Load(const float* p) {
  F8 x;
  std::memcpy(&x, p, sizeof(x));
  return x;
}
POSENC_SIMD_INLINE void Store(float* p, F8 x) { std::memcpy(p, &x, sizeof(x)); }
POSENC_SIMD_INLINE F8 Splat(float x) { return F8{} + x; }
POSENC_SIMD_INLINE float HSum(F8 x) {
  return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7]));
}
POSENC_SIMD_INLINE float HMax(F8 x) {
  float m = x[0];
  for (int i = 1; i < 8; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

/// ExpF32 (exp_kernel.h), eight lanes at a time: the same operations in the same order, so the same results.
/// Exp8<true>: for x <= 0 only (softmax after max subtraction; -inf allowed), skipping the upper clamp.
template <bool kNonPositive = false>
POSENC_SIMD_INLINE F8 Exp8(F8 x) {
  using namespace exp_constants;
  x = x < Splat(kMinArg) ? Splat(kMinArg) : x;
  if constexpr (!kNonPositive) x = x > Splat(kMaxArg) ? Splat(kMaxArg) : x;
  const F8 shifted = x * kLog2e + kRoundShift;
  const I8 n = std::bit_cast<I8>(shifted) - kRoundShiftBits;
  const F8 fn = shifted - kRoundShift;
  F8 r = x - fn * kLn2Hi;
  r = r - fn * kLn2Lo;
  F8 p = Splat(kP0);
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * (r * r) + r + 1.0f;
  return p * std::bit_cast<F8>((n + 127) << 23);
}

POSENC_SIMD_INLINE D4 SplatD(double x) { return D4{} + x; }
POSENC_SIMD_INLINE double HSumD(D4 x) { return (x[0] + x[1]) + (x[2] + x[3]); }

/// e^x in float64 for x in [-708, 0] (callers: log-sum-exp after max subtraction), within 2 ulp: Cephes
/// `exp` (S. Moshier): x = n ln2 + r with ln2 in two parts, e^r = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2)).
/// Below -708 the argument is clamped (result ~3e-308 instead of a subnormal or 0: negligible in a sum
/// that contains the term 1).
POSENC_SIMD_INLINE D4 ExpD4(D4 x) {
  x = x < SplatD(-708.0) ? SplatD(-708.0) : x;
  const D4 shifted = x * 1.4426950408889634073599 + 6755399441055744.0;  // 1.5 * 2^52: round to nearest
  const L4 n = std::bit_cast<L4>(shifted) - std::bit_cast<int64_t>(6755399441055744.0);
  const D4 fn = shifted - 6755399441055744.0;
  D4 r = x - fn * 6.93145751953125e-1;
  r = r - fn * 1.42860682030941723212e-6;
  const D4 rr = r * r;
  D4 p = SplatD(1.26177193074810590878e-4);
  p = p * rr + 3.02994407707441961300e-2;
  p = p * rr + 9.99999999999999999910e-1;
  p = p * r;
  D4 q = SplatD(3.00198505138664455042e-6);
  q = q * rr + 2.52448340349684104192e-3;
  q = q * rr + 2.27265548208155028766e-1;
  q = q * rr + 2.00000000000000000009e0;
  const D4 e = 1.0 + 2.0 * (p / (q - p));
  return e * std::bit_cast<D4>((n + 1023) << 52);
}

}  // namespace posenc::simd
