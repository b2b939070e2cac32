// RoPE cos/sin of one position for all frequency pairs, computed on the fly (no table): a vectorised sincos
// in float64 lanes (Highway, runtime dispatch) and its plain C++ twin. Pointers and sizes only; callers
// validate (rope/apply.h). Used by the RoPE kernel's on-the-fly mode (rope_kernels.h).
//
// Why not hn::Sin / hn::Cos: Highway 1.0.3's are float32, 3 ulp, and valid only for |x| <= 39000 rad, while
// RoPE angles reach 1e5 - 1e8 rad (position 2^20 times inv_freq 1).
#pragma once

#include <cstdint>

#include "posenc/core/rope_enums.h"

namespace posenc::kernels {

/// Positions (and angles, in radians) must satisfy |pos| < kSinCosMaxAbs and |pos * inv_freq| < kSinCosMaxAbs:
/// then the exact float64 angle, its reduction by pi/2 and the quadrant count below are exact (2^29 also
/// bounds the table's float64 product, see RopePrecision).
inline constexpr int64_t kSinCosMaxAbs = int64_t{1} << 29;

/// cos/sin of every pair for one position, as one row of ComputeCosSin(freqs, {pos}, precision) with
/// attention_factor folded (pass 1.0 for AttentionFold::kApart).
///
/// Shapes:  inv_freq [n] float32 (RopeFrequencies::inv_freq, radians/token); cos_out, sin_out [n] float32.
/// Units:   pos in tokens (negative allowed); angles in radians.
/// Method:  angle a:
///            kExact: a = double(inv_freq[i]) * double(pos), exact (24-bit x 29-bit product fits 53 bits);
///            kHf:    a = double(fl32(inv_freq[i] * fl32(pos))) (HF's float32 angle, then widened exactly).
///          Reduction: k = nearest integer to fl(a * 2/pi) (magic-constant rounding; |k| < 2^29), and
///          r = a - k pi/2 with pi/2 = P1 + P2 + P3 + P4, where P1..P3 carry 24 significant bits each (so
///          k*P1, k*P2, k*P3 are exact) and P4 is the float64 rounding of the rest (|pi/2 - sum| < 2^-125);
///          the three subtractions are error-free (TwoSum), their error terms and k*P4 are summed in float64
///          and added once. Then sin(r) = r + r^3 P(r^2) (Taylor to r^13) and cos(r) = 1 - r^2/2 + r^4 Q(r^2)
///          (Taylor to r^14), |r| <= pi/4 + 2^-23, and the quadrant k mod 4 swaps / negates them. No fused
///          multiply-add anywhere, so every target and SinCosRowScalar give identical bits.
///          kExact: cos_out = fl32(cos * attention_factor) (product in float64);
///          kHf:    cos_out = fl32(fl32(cos) * fl32(attention_factor)) (product in float32), as HF.
/// Error bound (derivation): reduction: k*P4's rounding and the tail sum are below 2^29 * 2^-125 + 3 * 2^-53 *
///          2^-42 < 2^-92 absolute, plus 2^-53 relative from the final addition. No float64 lies closer than
///          2^-60.9 to a nonzero multiple of pi/2 (the Kahan-McDonald worst case, 6381956970095103 * 2^797;
///          J.-M. Muller, Elementary Functions, Sec. 11.1), so r is within 2^-31 relative (2^-52 whenever
///          |r| >= 2^-40: nearly always). Polynomials: truncation (0.7854^15/15! / sin(0.7854) < 2^-44.5,
///          0.7854^16/16! < 2^-49) plus Horner rounding (< 8 * 2^-53). Hence the float64 cos/sin carry a
///          relative error below 2^-31 + 2^-44, i.e. below 2^-7 ulp of the float32 result, so:
///            kExact: each output is within 0.51 ulp (float32) of the true cos(inv_freq * pos) *
///                    attention_factor, for every |pos| < 2^29: the 2-ulp guarantee of RopePrecision::kExact
///                    holds with room. It differs from ComputeCosSin(kExact) (glibc, also within 0.51 ulp) by at
///                    most 1 ulp, and only where the true value lies within 2^-31 (relative) of a rounding
///                    boundary.
///            kHf:    fl32(cos) is within 0.51 ulp of the true cos of the float32 angle, so within 1 ulp of
///                    ComputeCosSin(kHf, kApart); after the float32 product with fl32(attention_factor) the
///                    folded value is within 2 ulp of ComputeCosSin(kHf, kFolded) (a 1-ulp difference scaled
///                    by a factor in [1, 2) is < 2 ulp of the product, then each side rounds once).
/// Preconditions (not checked here; apply.cc checks them): n >= 0; |pos| < kSinCosMaxAbs;
///          |pos * inv_freq[i]| < kSinCosMaxAbs; attention_factor finite.
/// Source:  Cody & Waite, Software Manual for the Elementary Functions (1980), additive range reduction;
///          Knuth TAOCP vol. 2, 4.2.2 (TwoSum); HF `LlamaRotaryEmbedding.forward` for kHf's float32 angle.
void SinCosRow(const float* inv_freq, int64_t n, int64_t pos, double attention_factor, RopePrecision precision,
               float* cos_out, float* sin_out);

/// The same operations one element at a time in plain C++ (the reference SinCosRow is tested against; equal
/// bits on every target). Also what RopeKernelScalar uses in on-the-fly mode.
void SinCosRowScalar(const float* inv_freq, int64_t n, int64_t pos, double attention_factor,
                     RopePrecision precision, float* cos_out, float* sin_out);

/// Name of the Highway target SinCosRow dispatches to ("AVX2", ...).
const char* SinCosTargetName();

}  // namespace posenc::kernels
