// On-the-fly RoPE cos/sin (SinCosRow, Highway float64 lanes, runtime dispatch) and its scalar twin
// (SinCosRowScalar). Method and error bound: sincos.h. Every step is a separately rounded IEEE float64
// operation (no fused multiply-add; the library builds with -ffp-contract=off), so the SIMD lanes and the
// scalar twin compute the same bits on every target.
#include "posenc/kernels/sincos.h"

#include <cstring>

#ifndef POSENC_KERNELS_SINCOS_CONSTANTS_
#define POSENC_KERNELS_SINCOS_CONSTANTS_
namespace posenc::kernels::sincos_constants {

// pi/2 = kP1 + kP2 + kP3 + kP4 + (< 2^-126): kP1..kP3 are pi/2 truncated to 24, 48 and 72 significant bits
// (differences), so k * kPi is exact for |k| < 2^29; kP4 is the float64 rounding of the rest.
constexpr double kP1 = 0x1.921fb4p+0;
constexpr double kP2 = 0x1.4442dp-24;
constexpr double kP3 = 0x1.846988p-48;
constexpr double kP4 = 0x1.8cc51701b839ap-72;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;  // 2/pi rounded to float64
// Adding 1.5 * 2^52 rounds |x| < 2^51 to the nearest integer k and leaves k (two's complement) in the low
// mantissa bits.
constexpr double kRoundMagic = 0x1.8p52;
// Taylor coefficients: sin r = r + r^3 (kS1 + r^2 (kS2 + ... + r^2 kS6)), (-1)^j / (2j+1)! rounded;
// cos r = 1 + r^2 (-1/2 + r^2 (kC2 + ... + r^2 kC7)), (-1)^j / (2j)! rounded.
constexpr double kS1 = -0x1.5555555555555p-3;
constexpr double kS2 = 0x1.1111111111111p-7;
constexpr double kS3 = -0x1.a01a01a01a01ap-13;
constexpr double kS4 = 0x1.71de3a556c734p-19;
constexpr double kS5 = -0x1.ae64567f544e4p-26;
constexpr double kS6 = 0x1.6124613a86d09p-33;
constexpr double kC2 = 0x1.5555555555555p-5;
constexpr double kC3 = -0x1.6c16c16c16c17p-10;
constexpr double kC4 = 0x1.a01a01a01a01ap-16;
constexpr double kC5 = -0x1.27e4fb7789f5cp-22;
constexpr double kC6 = 0x1.1eed8eff8d898p-29;
constexpr double kC7 = -0x1.93974a8c07c9dp-37;

}  // namespace posenc::kernels::sincos_constants
#endif  // POSENC_KERNELS_SINCOS_CONSTANTS_

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/sincos.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace sc = kernels::sincos_constants;

// (s, e) with s = fl(a + b) and s + e = a + b exactly (Knuth's TwoSum; any order of magnitudes).
template <class V>
HWY_INLINE void TwoSum(V a, V b, V& s, V& e) {
  s = hn::Add(a, b);
  const V bb = hn::Sub(s, a);
  e = hn::Add(hn::Sub(a, hn::Sub(s, bb)), hn::Sub(b, bb));
}

// cos and sin of float64 angles a, |a| < 2^29 (see sincos.h).
template <class DD>
HWY_INLINE void SinCosD(DD dd, hn::Vec<DD> a, hn::Vec<DD>& cos_out, hn::Vec<DD>& sin_out) {
  using V = hn::Vec<DD>;
  const hn::RebindToUnsigned<DD> du;
  const V magic = hn::Set(dd, sc::kRoundMagic);
  const V t = hn::Add(hn::Mul(a, hn::Set(dd, sc::kTwoOverPi)), magic);
  const V k = hn::Sub(t, magic);  // nearest integer to fl(a * 2/pi), exact
  const auto q = hn::And(hn::BitCast(du, t), hn::Set(du, 3));  // k mod 4
  // r = a - k pi/2: three error-free subtractions of exact products, then the tails once.
  V s1, e1, s2, e2, s3, e3;
  TwoSum(a, hn::Neg(hn::Mul(k, hn::Set(dd, sc::kP1))), s1, e1);
  TwoSum(s1, hn::Neg(hn::Mul(k, hn::Set(dd, sc::kP2))), s2, e2);
  TwoSum(s2, hn::Neg(hn::Mul(k, hn::Set(dd, sc::kP3))), s3, e3);
  const V tail = hn::Sub(hn::Add(hn::Add(e1, e2), e3), hn::Mul(k, hn::Set(dd, sc::kP4)));
  const V r = hn::Add(s3, tail);
  const V r2 = hn::Mul(r, r);
  V ps = hn::Set(dd, sc::kS6);
  ps = hn::Add(hn::Set(dd, sc::kS5), hn::Mul(r2, ps));
  ps = hn::Add(hn::Set(dd, sc::kS4), hn::Mul(r2, ps));
  ps = hn::Add(hn::Set(dd, sc::kS3), hn::Mul(r2, ps));
  ps = hn::Add(hn::Set(dd, sc::kS2), hn::Mul(r2, ps));
  ps = hn::Add(hn::Set(dd, sc::kS1), hn::Mul(r2, ps));
  const V sin_r = hn::Add(r, hn::Mul(hn::Mul(r, r2), ps));
  V pc = hn::Set(dd, sc::kC7);
  pc = hn::Add(hn::Set(dd, sc::kC6), hn::Mul(r2, pc));
  pc = hn::Add(hn::Set(dd, sc::kC5), hn::Mul(r2, pc));
  pc = hn::Add(hn::Set(dd, sc::kC4), hn::Mul(r2, pc));
  pc = hn::Add(hn::Set(dd, sc::kC3), hn::Mul(r2, pc));
  pc = hn::Add(hn::Set(dd, sc::kC2), hn::Mul(r2, pc));
  pc = hn::Add(hn::Set(dd, -0.5), hn::Mul(r2, pc));
  const V cos_r = hn::Add(hn::Set(dd, 1.0), hn::Mul(r2, pc));
  // Quadrant: odd k swaps sin and cos; sin is negated for k mod 4 in {2, 3}, cos for {1, 2}.
  const auto one = hn::Set(du, 1);
  const auto two = hn::Set(du, 2);
  const auto swap = hn::RebindMask(dd, hn::Eq(hn::And(q, one), one));
  const auto sin_sign = hn::BitCast(dd, hn::ShiftLeft<62>(hn::And(q, two)));
  const auto cos_sign = hn::BitCast(dd, hn::ShiftLeft<62>(hn::And(hn::Add(q, one), two)));
  sin_out = hn::Xor(hn::IfThenElse(swap, cos_r, sin_r), sin_sign);
  cos_out = hn::Xor(hn::IfThenElse(swap, sin_r, cos_r), cos_sign);
}

// Pairs [i, n) as far as whole vectors of dd reach; returns the first pair not done.
template <class DD>
HWY_INLINE int64_t SinCosLoop(DD dd, const float* inv_freq, int64_t i, int64_t n, int64_t pos,
                              double attention_factor, RopePrecision precision, float* cos_out, float* sin_out) {
  const hn::Rebind<float, DD> df;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(dd));
  if (precision == RopePrecision::kExact) {
    const auto pos_d = hn::Set(dd, static_cast<double>(pos));
    const auto scale = hn::Set(dd, attention_factor);
    for (; i + lanes <= n; i += lanes) {
      const auto a = hn::Mul(hn::PromoteTo(dd, hn::LoadU(df, inv_freq + i)), pos_d);  // exact
      hn::Vec<DD> c, s;
      SinCosD(dd, a, c, s);
      hn::StoreU(hn::DemoteTo(df, hn::Mul(c, scale)), df, cos_out + i);
      hn::StoreU(hn::DemoteTo(df, hn::Mul(s, scale)), df, sin_out + i);
    }
  } else {
    const auto pos_f = hn::Set(df, static_cast<float>(pos));
    const auto scale = hn::Set(df, static_cast<float>(attention_factor));
    for (; i + lanes <= n; i += lanes) {
      const auto a = hn::PromoteTo(dd, hn::Mul(hn::LoadU(df, inv_freq + i), pos_f));  // HF's float32 angle
      hn::Vec<DD> c, s;
      SinCosD(dd, a, c, s);
      hn::StoreU(hn::Mul(hn::DemoteTo(df, c), scale), df, cos_out + i);
      hn::StoreU(hn::Mul(hn::DemoteTo(df, s), scale), df, sin_out + i);
    }
  }
  return i;
}

void SinCosRowImpl(const float* inv_freq, int64_t n, int64_t pos, double attention_factor, RopePrecision precision,
                   float* cos_out, float* sin_out) {
  const int64_t i = SinCosLoop(hn::ScalableTag<double>(), inv_freq, 0, n, pos, attention_factor, precision,
                               cos_out, sin_out);
  if (i < n) {
    SinCosLoop(hn::CappedTag<double, 1>(), inv_freq, i, n, pos, attention_factor, precision, cos_out, sin_out);
  }
}

int64_t SinCosTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(SinCosRowImpl);
HWY_EXPORT(SinCosTargetImpl);

namespace kernels {
namespace {

namespace sc = sincos_constants;

inline void TwoSumScalar(double a, double b, double& s, double& e) {
  s = a + b;
  const double bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// SinCosD, one element (the same operations in the same order).
void SinCosScalar(double a, double& cos_out, double& sin_out) {
  const double t = a * sc::kTwoOverPi + sc::kRoundMagic;
  const double k = t - sc::kRoundMagic;
  uint64_t bits;
  std::memcpy(&bits, &t, sizeof bits);
  const uint64_t q = bits & 3u;
  double s1, e1, s2, e2, s3, e3;
  TwoSumScalar(a, -(k * sc::kP1), s1, e1);
  TwoSumScalar(s1, -(k * sc::kP2), s2, e2);
  TwoSumScalar(s2, -(k * sc::kP3), s3, e3);
  const double tail = ((e1 + e2) + e3) - k * sc::kP4;
  const double r = s3 + tail;
  const double r2 = r * r;
  double ps = sc::kS6;
  ps = sc::kS5 + r2 * ps;
  ps = sc::kS4 + r2 * ps;
  ps = sc::kS3 + r2 * ps;
  ps = sc::kS2 + r2 * ps;
  ps = sc::kS1 + r2 * ps;
  const double sin_r = r + (r * r2) * ps;
  double pc = sc::kC7;
  pc = sc::kC6 + r2 * pc;
  pc = sc::kC5 + r2 * pc;
  pc = sc::kC4 + r2 * pc;
  pc = sc::kC3 + r2 * pc;
  pc = sc::kC2 + r2 * pc;
  pc = -0.5 + r2 * pc;
  const double cos_r = 1.0 + r2 * pc;
  const double sv = (q & 1u) ? cos_r : sin_r;
  const double cv = (q & 1u) ? sin_r : cos_r;
  sin_out = (q & 2u) ? -sv : sv;
  cos_out = ((q + 1u) & 2u) ? -cv : cv;
}

}  // namespace

void SinCosRow(const float* inv_freq, int64_t n, int64_t pos, double attention_factor, RopePrecision precision,
               float* cos_out, float* sin_out) {
  HWY_DYNAMIC_DISPATCH(SinCosRowImpl)(inv_freq, n, pos, attention_factor, precision, cos_out, sin_out);
}

void SinCosRowScalar(const float* inv_freq, int64_t n, int64_t pos, double attention_factor,
                     RopePrecision precision, float* cos_out, float* sin_out) {
  const float pos_f = static_cast<float>(pos);
  const float scale_f = static_cast<float>(attention_factor);
  for (int64_t i = 0; i < n; ++i) {
    double c, s;
    if (precision == RopePrecision::kExact) {
      SinCosScalar(static_cast<double>(inv_freq[i]) * static_cast<double>(pos), c, s);
      cos_out[i] = static_cast<float>(c * attention_factor);
      sin_out[i] = static_cast<float>(s * attention_factor);
    } else {
      const float angle = inv_freq[i] * pos_f;
      SinCosScalar(static_cast<double>(angle), c, s);
      cos_out[i] = static_cast<float>(c) * scale_f;
      sin_out[i] = static_cast<float>(s) * scale_f;
    }
  }
}

const char* SinCosTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(SinCosTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
