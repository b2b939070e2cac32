// A vectorisable float32 exp for softmax and SiLU loops (no libm call, so `#pragma omp simd` loops vectorise).
#pragma once

#include <bit>
#include <cstdint>

namespace posenc {

/// e^x in float32, within 2 ulp of the correctly rounded value for x in [-87.3, 88.3] (Cephes `expf`
/// polynomial on [-ln2/2, ln2/2] after the reduction x = n ln2 + r, with ln2 split in two parts).
/// Outside that range x is clamped first: e^x for x < -87.34 returns ~1.2e-38 instead of a subnormal or 0,
/// and x > 88.37 returns ~2.4e38 instead of infinity; both are harmless where it is used (softmax after
/// max subtraction, whose terms below e^-87 are negligible next to the max term 1, and the SiLU denominator).
/// NaN input gives an unspecified value; callers never pass NaN.
/// Source: S. Moshier, Cephes Math Library, expf.c (coefficients and Cody-Waite constants).
inline float ExpF32(float x) {
  x = x < -87.33654f ? -87.33654f : x;
  x = x > 88.37626f ? 88.37626f : x;
  // n = round(x / ln2) with the 1.5 * 2^23 trick (exact for |x / ln2| < 2^22).
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  const int32_t n = std::bit_cast<int32_t>(shifted) - 0x4B400000;
  const float fn = shifted - 12582912.0f;
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  return p * std::bit_cast<float>((n + 127) << 23);
}

}  // namespace posenc
