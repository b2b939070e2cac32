// A vectorisable float32 exp for softmax and SiLU loops (no libm call, so `#pragma omp simd` loops vectorise).
#pragma once

#include <bit>
#include <cstdint>

namespace posenc {

/// The constants of ExpF32, shared with the Highway kernels that must give its bits lane for lane.
namespace exp_constants {
inline constexpr float kMinArg = -87.33654f;       // lower clamp
inline constexpr float kMaxArg = 88.37626f;        // upper clamp
inline constexpr float kLog2e = 1.44269504088896341f;
inline constexpr float kRoundShift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
inline constexpr int32_t kRoundShiftBits = 0x4B400000;
inline constexpr float kLn2Hi = 0.693359375f;      // ln 2 = kLn2Hi + kLn2Lo (Cody-Waite)
inline constexpr float kLn2Lo = -2.12194440e-4f;
inline constexpr float kP0 = 1.9875691500e-4f, kP1 = 1.3981999507e-3f, kP2 = 8.3334519073e-3f,
                       kP3 = 4.1665795894e-2f, kP4 = 1.6666665459e-1f, kP5 = 5.0000001201e-1f;
}  // namespace exp_constants

/// e^x in float32, within 2 ulp of the correctly rounded value for x in [-87.3, 88.3] (Cephes `expf`
/// polynomial on [-ln2/2, ln2/2] after the reduction x = n ln2 + r, with ln2 split in two parts).
/// Outside that range x is clamped first: e^x for x < -87.34 returns ~1.2e-38 instead of a subnormal or 0,
/// and x > 88.37 returns ~2.4e38 instead of infinity; both are harmless where it is used (softmax after
/// max subtraction, whose terms below e^-87 are negligible next to the max term 1, and the SiLU denominator).
/// NaN input gives an unspecified value; callers never pass NaN.
/// Source: S. Moshier, Cephes Math Library, expf.c (coefficients and Cody-Waite constants).
inline float ExpF32(float x) {
  using namespace exp_constants;
  x = x < kMinArg ? kMinArg : x;
  x = x > kMaxArg ? kMaxArg : x;
  // n = round(x / ln2) with the 1.5 * 2^23 trick (exact for |x / ln2| < 2^22).
  const float shifted = x * kLog2e + kRoundShift;
  const int32_t n = std::bit_cast<int32_t>(shifted) - kRoundShiftBits;
  const float fn = shifted - kRoundShift;
  float r = x - fn * kLn2Hi;
  r = r - fn * kLn2Lo;
  float p = kP0;
  p = p * r + kP1;
  p = p * r + kP2;
  p = p * r + kP3;
  p = p * r + kP4;
  p = p * r + kP5;
  p = p * (r * r) + r + 1.0f;
  return p * std::bit_cast<float>((n + 127) << 23);
}

}  // namespace posenc
