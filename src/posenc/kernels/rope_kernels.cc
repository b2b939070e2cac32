// Highway RoPE kernel (RopeKernelSimd / RopeKernelQK / RopeKernel): compiled once per x86 target by
// foreach_target.h and picked at run time. Dispatcher, path selection and OpenMP threading at the bottom
// (HWY_ONCE). The scalar reference lives in rope_kernels_scalar.cc.
//
// Math (Su et al. 2021, RoFormer, Sec. 3.4.2): pair (a, b) with coefficients (c, s) becomes
//   (a c - b s, a s + b c).
// Rounding: each output fuses its own element's product with c (MulAdd/MulSub; fused on AVX2/AVX3) and rounds
// the partner's product with s: a' = fl(a c - fl(b s)), b' = fl(b c + fl(a s)); the same in both layouts, so
// they agree bit for bit. Every direction is reduced to this one formula by coefficients prepared per token:
//   kForward:  (c, s) = the table row (read in place, no copy);
//   kBackward: (c, -s);
//   kInverse:  (c * r, -(s * r)), r = 1 / (c*c + s*s) rounded as the scalar reference rounds it.
// Pairs: half-split (i, i + half) loads a and b as two vectors; interleaved (2i, 2i+1) loads one vector x and
// forms x * cd + Reverse2(x) * sd with cd = (c0, c0, c1, c1, ...) and sd = (-s0, s0, -s1, s1, ...).
// Small heads (2*half <= lanes and divides them, heads contiguous and fully rotated, e.g. stories260K's
// head_dim 8) are rotated several heads per vector: the coefficient pattern repeats every head, the partner
// lane comes from TableLookupLanes (half-split) or Reverse2 (interleaved).
// Coefficients: a table row per token, or (on the fly, args.inv_freq set) SinCosRow's values for the token's
// position, computed into a per-token buffer once for all heads of Q and K.
// bfloat16 heads are rotated as 32-bit words of two elements (see "bfloat16 pairs as 32-bit words").
#include "posenc/kernels/rope_kernels.h"

#include <omp.h>

#include "posenc/kernels/sincos.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/rope_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::RopeKernelArgs;

// Pairs per coefficient chunk: bounds the per-token scratch (half <= 256, head_dim <= 512, is one chunk).
constexpr int64_t kChunk = 256;

// Storage types; all math is float32.
struct StoreF32 {
  using T = float;
};
struct StoreBF16 {
  using T = uint16_t;
};
struct StoreF16 {
  using T = uint16_t;
};

// Highway 1.0.3's float16 conversions are exact and round to nearest even only through F16C (AVX2/AVX3);
// the SSE4/SSSE3 emulation truncates, so float16 on those targets runs the scalar reference.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
constexpr bool kNativeF16 = true;
#else
constexpr bool kNativeF16 = false;
#endif

// ---- loads and stores: storage <-> float32 vectors ------------------------------------------------------

template <class D>
HWY_INLINE hn::Vec<D> LoadF(StoreF32, D d, const float* p) {
  return hn::LoadU(d, p);
}
template <class D>
HWY_INLINE void StoreF(StoreF32, D d, hn::Vec<D> v, float* p) {
  hn::StoreU(v, d, p);
}

// bfloat16: the upper half of a float32, widened exactly.
template <class D>
HWY_INLINE hn::Vec<D> LoadF(StoreBF16, D d, const uint16_t* p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::RebindToUnsigned<D> du32;
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du32, hn::LoadU(du16, p))));
}
// float32 bits whose upper 16 are v rounded to bfloat16 as posenc::F32ToBF16 rounds (nearest even; Highway
// 1.0.3's DemoteTo truncates); a NaN stays a NaN with the quiet bit set.
template <class D>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<D>> RoundToBF16High(D d, hn::Vec<D> v) {
  const hn::RebindToUnsigned<D> du32;
  (void)d;
  const auto u = hn::BitCast(du32, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du32, 1u));
  const auto rounded = hn::Add(u, hn::Add(hn::Set(du32, 0x7fffu), lsb));
  const auto quiet_nan = hn::Or(u, hn::Set(du32, 0x00400000u));
  return hn::IfThenElse(hn::RebindMask(du32, hn::IsNaN(v)), quiet_nan, rounded);
}
template <class D>
HWY_INLINE void StoreF(StoreBF16, D d, hn::Vec<D> v, uint16_t* p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::RebindToSigned<D> di32;
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di32, hn::ShiftRight<16>(RoundToBF16High(d, v)))), du16, p);
}

// float16 through F16C (vcvtph2ps / vcvtps2ph with round-to-nearest-even); only used when kNativeF16.
template <class D>
HWY_INLINE hn::Vec<D> LoadF(StoreF16, D d, const uint16_t* p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::Rebind<hwy::float16_t, D> df16;
  return hn::PromoteTo(d, hn::BitCast(df16, hn::LoadU(du16, p)));
}
template <class D>
HWY_INLINE void StoreF(StoreF16, D d, hn::Vec<D> v, uint16_t* p) {
  const hn::Rebind<uint16_t, D> du16;
  const hn::Rebind<hwy::float16_t, D> df16;
  (void)d;
  hn::StoreU(hn::BitCast(du16, hn::DemoteTo(df16, v)), du16, p);
}

// One element, for the interleaved pairs of the 1-lane SCALAR target.
HWY_INLINE float LoadS(StoreF32, const float* p) { return *p; }
HWY_INLINE void StoreS(StoreF32, float v, float* p) { *p = v; }
HWY_INLINE float LoadS(StoreBF16, const uint16_t* p) { return BF16ToF32(*p); }
HWY_INLINE void StoreS(StoreBF16, float v, uint16_t* p) { *p = F32ToBF16(v); }
HWY_INLINE float LoadS(StoreF16, const uint16_t* p) { return F16ToF32(*p); }
HWY_INLINE void StoreS(StoreF16, float v, uint16_t* p) { *p = F32ToF16(v); }

// Two full vectors to 2 * Lanes(d) consecutive elements (v0 first). bfloat16 packs both with one ConcatOdd
// (the rounded high halves), one store.
template <class D>
HWY_INLINE void StoreF2(StoreF32, D d, hn::Vec<D> v0, hn::Vec<D> v1, float* p) {
  hn::StoreU(v0, d, p);
  hn::StoreU(v1, d, p + hn::Lanes(d));
}
template <class D>
HWY_INLINE void StoreF2(StoreF16, D d, hn::Vec<D> v0, hn::Vec<D> v1, uint16_t* p) {
  StoreF(StoreF16(), d, v0, p);
  StoreF(StoreF16(), d, v1, p + hn::Lanes(d));
}
#if HWY_TARGET != HWY_SCALAR  // (1-lane SCALAR has no ConcatOdd and never unrolls)
template <class D>
HWY_INLINE void StoreF2(StoreBF16, D d, hn::Vec<D> v0, hn::Vec<D> v1, uint16_t* p) {
  const hn::Repartition<uint16_t, D> du16;  // 2 * Lanes(d) lanes
  hn::StoreU(
      hn::ConcatOdd(du16, hn::BitCast(du16, RoundToBF16High(d, v1)), hn::BitCast(du16, RoundToBF16High(d, v0))),
      du16, p);
}
constexpr bool kUnroll2 = true;  // two vectors per iteration: one bfloat16 pack per two vectors
#else
constexpr bool kUnroll2 = false;
#endif

// ---- bfloat16 pairs as 32-bit words ----------------------------------------------------------------------
//
// Two adjacent bfloat16 elements are one little-endian 32-bit word w: as float32 bits the first (lower
// address) is w << 16 and the second w & 0xffff0000, both exact. After the rotation each float32 result u is
// rounded to nearest even as F32ToBF16 rounds it, (u + 0x7fff + ((u >> 16) & 1)) >> 16, computed for both
// elements of a word at once in 16-bit lanes (PackWords): no cross-lane shuffle, no pack, no widening. Used for whole vectors of words of bfloat16 heads (both layouts); tails and small heads keep the
// element paths above. The results are bit-identical to those paths.
//
// NaN: the rounding add carries into the upper half only when the low 16 bits are >= 0x8001 (or 0x8000 with
// bit 16 set), so a NaN result stays a NaN (with the quiet bit F32ToBF16 sets) exactly when its low 16 bits
// are < 0x8000. Every NaN the rotation can produce has zero low bits: an input element is a widened bfloat16
// (low 16 bits 0) and keeps its payload, quietened, through multiply/FMA; 0 * inf and inf - inf give x86's
// default NaN 0xffc00000. The one other source is a NaN coefficient with a payload in its low bits, so the
// word path runs only for tokens whose coefficients are all free of NaN and infinity (AnyNonFinite, once per
// token); other tokens take the element path, which checks every lane.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr bool kBf16Words = true;
#else
constexpr bool kBf16Words = false;
#endif

// Whether any of c[0..m), s[0..m) is a NaN or an infinity (x * 0 is then NaN).
HWY_INLINE bool AnyNonFinite(const float* c, const float* s, int64_t m) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto zero = hn::Zero(d);
  auto acc = zero;
  int64_t i = 0;
  for (; i + n <= m; i += n) {
    acc = hn::Add(acc, hn::Add(hn::Mul(hn::LoadU(d, c + i), zero), hn::Mul(hn::LoadU(d, s + i), zero)));
  }
  bool bad = !hn::AllFalse(d, hn::IsNaN(acc));
  for (; i < m; ++i) bad |= !std::isfinite(c[i]) || !std::isfinite(s[i]);
  return bad;
}

template <class DU>
HWY_INLINE hn::Vec<DU> RoundBF16Bits(DU du, hn::Vec<DU> u) {
  return hn::Add(u, hn::Add(hn::Set(du, 0x7fffu), hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1u))));
}

// Words whose first element is `first` and second `second`, each rounded to nearest even.
#if HWY_TARGET != HWY_SCALAR
// In 16-bit lanes: hi = the two truncated bfloat16 (upper halves), lo = the two discarded lower halves; RNE adds
// carry = [lo + (hi & 1) > 0x8000] to hi, which is (u + 0x7fff + lsb) >> 16 of the 32-bit formula
// (l + 0x7fff + lsb < 2^17, so the 32-bit sum carries into the upper half exactly when l + lsb >= 0x8001). The
// saturating add keeps lo = 0xffff, lsb = 1 above the threshold; hi + carry wraps within its lane as the 32-bit
// formula's truncation to 16 bits does. 9 operations per word vector instead of 11.
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PackWords(DF df, hn::Vec<DF> first, hn::Vec<DF> second) {
  (void)df;
  const hn::RebindToUnsigned<DF> du;
  const hn::Repartition<uint16_t, DF> dh;
  const auto ue = hn::BitCast(du, first), uo = hn::BitCast(du, second);
  const auto hi = hn::OddEven(hn::BitCast(dh, uo), hn::BitCast(dh, hn::ShiftRight<16>(ue)));
  const auto lo = hn::OddEven(hn::BitCast(dh, hn::ShiftLeft<16>(uo)), hn::BitCast(dh, ue));
  const auto s = hn::SaturatedAdd(lo, hn::And(hi, hn::Set(dh, uint16_t{1})));
  const auto carry = hn::Min(hn::SaturatedSub(s, hn::Set(dh, uint16_t{0x8000})), hn::Set(dh, uint16_t{1}));
  return hn::BitCast(du, hn::Add(hi, carry));
}
#else
template <class DF>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> PackWords(DF df, hn::Vec<DF> first, hn::Vec<DF> second) {
  const hn::RebindToUnsigned<DF> du;
  (void)df;
  return hn::Or(hn::ShiftRight<16>(RoundBF16Bits(du, hn::BitCast(du, first))),
                hn::And(RoundBF16Bits(du, hn::BitCast(du, second)), hn::Set(du, 0xffff0000u)));
}
#endif

template <class DF>
HWY_INLINE void UnpackWords(DF df, hn::Vec<hn::RebindToUnsigned<DF>> w, hn::Vec<DF>& first, hn::Vec<DF>& second) {
  const hn::RebindToUnsigned<DF> du;
  first = hn::BitCast(df, hn::ShiftLeft<16>(w));
  second = hn::BitCast(df, hn::And(w, hn::Set(du, 0xffff0000u)));
}

// One vector position of the word path: rotate(h) for every head in [h0, h1) when heads_inner (two heads per
// iteration: half the loop overhead), else for h0 only (heads outer: the caller then runs the other heads'
// whole rows, each in address order).
template <class F>
HWY_INLINE void RotateHeadsAt(int64_t h0, int64_t h1, bool heads_inner, const F& rotate) {
  if (!heads_inner) {
    rotate(h0);
    return;
  }
  int64_t h = h0;
  for (; h + 2 <= h1; h += 2) rotate(h), rotate(h + 1);
  if (h < h1) rotate(h);
}

// Interleaved: pairs [0, m) of heads h0 .. h1-1 (head h at x + h * head_stride), word i = pair i = (a, b); c/s
// are the plain per-pair coefficients. heads_inner: the loop over heads is the inner one (a vector of
// coefficients is loaded once for all heads; see RotateHeads for when). Returns the first pair not done (whole
// vectors only).
HWY_INLINE int64_t InterleavedWordsBF16(uint16_t* x, int64_t h0, int64_t h1, int64_t head_stride, const float* c,
                                        const float* s, int64_t m, bool heads_inner) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + n <= m; i += n) {
    const auto cv = hn::LoadU(df, c + i), sv = hn::LoadU(df, s + i);
    const auto rotate = [&](int64_t h) HWY_ATTR {
      uint32_t* w = reinterpret_cast<uint32_t*>(x + h * head_stride) + i;
      hn::Vec<decltype(df)> a, b;
      UnpackWords(df, hn::LoadU(du, w), a, b);
      hn::StoreU(PackWords(df, hn::MulSub(a, cv, hn::Mul(b, sv)), hn::MulAdd(b, cv, hn::Mul(a, sv))), du, w);
    };
    RotateHeadsAt(h0, h1, heads_inner, rotate);
  }
  if (!heads_inner) {  // heads outer: each head's words in address order (what the prefetchers stream)
    for (int64_t h = h0 + 1; h < h1; ++h) InterleavedWordsBF16(x + h * head_stride, 0, 1, 0, c, s, m, true);
  }
  return i;
}

// Half-split: pairs [0, m) of heads h0 .. h1-1 (head h: first halves at xa + h * head_stride, second halves at
// xb + h * head_stride), word j of xa = (a_2j, a_2j+1), of xb = (b_2j, b_2j+1); ce/co/se/so are the coefficients
// of the even and odd pairs (ce[j] = c[2j], co[j] = c[2j+1], ...). heads_inner as above. Returns the first pair
// not done (whole vectors of words only).
HWY_INLINE int64_t HalfSplitWordsBF16(uint16_t* xa, uint16_t* xb, int64_t h0, int64_t h1, int64_t head_stride,
                                      const float* ce, const float* co, const float* se, const float* so,
                                      int64_t m, bool heads_inner) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  const int64_t words = m / 2;
  int64_t j = 0;
  for (; j + n <= words; j += n) {
    const auto c0 = hn::LoadU(df, ce + j), c1 = hn::LoadU(df, co + j);
    const auto s0 = hn::LoadU(df, se + j), s1 = hn::LoadU(df, so + j);
    const auto rotate = [&](int64_t h) HWY_ATTR {
      uint32_t* wa = reinterpret_cast<uint32_t*>(xa + h * head_stride) + j;
      uint32_t* wb = reinterpret_cast<uint32_t*>(xb + h * head_stride) + j;
      hn::Vec<decltype(df)> a0, a1, b0, b1;
      UnpackWords(df, hn::LoadU(du, wa), a0, a1);
      UnpackWords(df, hn::LoadU(du, wb), b0, b1);
      hn::StoreU(PackWords(df, hn::MulSub(a0, c0, hn::Mul(b0, s0)), hn::MulSub(a1, c1, hn::Mul(b1, s1))), du, wa);
      hn::StoreU(PackWords(df, hn::MulAdd(b0, c0, hn::Mul(a0, s0)), hn::MulAdd(b1, c1, hn::Mul(a1, s1))), du, wb);
    };
    RotateHeadsAt(h0, h1, heads_inner, rotate);
  }
  if (!heads_inner) {  // heads outer: each head's words in address order (what the prefetchers stream)
    for (int64_t h = h0 + 1; h < h1; ++h) {
      HalfSplitWordsBF16(xa + h * head_stride, xb + h * head_stride, 0, 1, 0, ce, co, se, so, m, true);
    }
  }
  return 2 * j;
}

// ce[j] = c[2j], co[j] = c[2j+1] (and the same for s), j < m / 2.
HWY_INLINE void SplitEvenOdd(const float* c, const float* s, int64_t m, float* ce, float* co, float* se,
                             float* so) {
  for (int64_t j = 0; j < m / 2; ++j) {
    ce[j] = c[2 * j], co[j] = c[2 * j + 1];
    se[j] = s[2 * j], so[j] = s[2 * j + 1];
  }
}

// ---- one head: half-split ------------------------------------------------------------------------------

// Pairs [i, m) as far as whole vectors of d reach: xa[i] is a, xb[i] its partner b. Returns the first pair
// not done.
template <class Tag, class D>
HWY_INLINE int64_t HalfSplitLoop(D d, typename Tag::T* xa, typename Tag::T* xb, const float* c, const float* s,
                                 int64_t i, int64_t m) {
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  for (; i + n <= m; i += n) {
    const auto a = LoadF(Tag(), d, xa + i);
    const auto b = LoadF(Tag(), d, xb + i);
    const auto cv = hn::LoadU(d, c + i);
    const auto sv = hn::LoadU(d, s + i);
    StoreF(Tag(), d, hn::MulSub(a, cv, hn::Mul(b, sv)), xa + i);
    StoreF(Tag(), d, hn::MulAdd(b, cv, hn::Mul(a, sv)), xb + i);
  }
  return i;
}

// Pairs [0, m) two full vectors at a time; returns the first pair not done.
template <class Tag>
HWY_INLINE int64_t HalfSplitLoop2(typename Tag::T* xa, typename Tag::T* xb, const float* c, const float* s,
                                  int64_t m) {
  const hn::ScalableTag<float> d;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 2 * n <= m; i += 2 * n) {
    const auto a0 = LoadF(Tag(), d, xa + i), a1 = LoadF(Tag(), d, xa + i + n);
    const auto b0 = LoadF(Tag(), d, xb + i), b1 = LoadF(Tag(), d, xb + i + n);
    const auto c0 = hn::LoadU(d, c + i), c1 = hn::LoadU(d, c + i + n);
    const auto s0 = hn::LoadU(d, s + i), s1 = hn::LoadU(d, s + i + n);
    StoreF2(Tag(), d, hn::MulSub(a0, c0, hn::Mul(b0, s0)), hn::MulSub(a1, c1, hn::Mul(b1, s1)), xa + i);
    StoreF2(Tag(), d, hn::MulAdd(b0, c0, hn::Mul(a0, s0)), hn::MulAdd(b1, c1, hn::Mul(a1, s1)), xb + i);
  }
  return i;
}

// m pairs (xa[i], xb[i]), i in [0, m): full vectors, then 8-, 4- and 1-lane vectors for the rest, so every
// pair (even on AVX3 with half = 8, 4 or 3) uses the same fused arithmetic and nothing is read or written
// outside the pairs.
template <class Tag>
HWY_INLINE void HalfSplitPairs(typename Tag::T* xa, typename Tag::T* xb, const float* c, const float* s,
                               int64_t m) {
  int64_t i = 0;
  if constexpr (kUnroll2) i = HalfSplitLoop2<Tag>(xa, xb, c, s, m);
  i = HalfSplitLoop<Tag>(hn::ScalableTag<float>(), xa, xb, c, s, i, m);
  if (i == m) return;
  if constexpr (HWY_LANES(float) > 8) i = HalfSplitLoop<Tag>(hn::CappedTag<float, 8>(), xa, xb, c, s, i, m);
  if constexpr (HWY_LANES(float) > 4) i = HalfSplitLoop<Tag>(hn::CappedTag<float, 4>(), xa, xb, c, s, i, m);
  HalfSplitLoop<Tag>(hn::CappedTag<float, 1>(), xa, xb, c, s, i, m);
}

// ---- one head: interleaved -----------------------------------------------------------------------------

// Channels [j, n) of one head (n even) as far as whole vectors of d reach; cd/sd are the duplicated and
// signed coefficients (see top of file). Lanes(d) is even, so a pair never straddles two vectors.
template <class Tag, class D>
HWY_INLINE int64_t InterleavedLoop(D d, typename Tag::T* x, const float* cd, const float* sd, int64_t j,
                                   int64_t n) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  for (; j + lanes <= n; j += lanes) {
    const auto v = LoadF(Tag(), d, x + j);
    const auto swapped = hn::Reverse2(d, v);
    StoreF(Tag(), d, hn::MulAdd(v, hn::LoadU(d, cd + j), hn::Mul(swapped, hn::LoadU(d, sd + j))), x + j);
  }
  return j;
}

// Channels [0, n) two full vectors at a time; returns the first channel not done.
template <class Tag>
HWY_INLINE int64_t InterleavedLoop2(typename Tag::T* x, const float* cd, const float* sd, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t j = 0;
  for (; j + 2 * lanes <= n; j += 2 * lanes) {
    const auto v0 = LoadF(Tag(), d, x + j), v1 = LoadF(Tag(), d, x + j + lanes);
    const auto r0 = hn::MulAdd(v0, hn::LoadU(d, cd + j), hn::Mul(hn::Reverse2(d, v0), hn::LoadU(d, sd + j)));
    const auto r1 =
        hn::MulAdd(v1, hn::LoadU(d, cd + j + lanes), hn::Mul(hn::Reverse2(d, v1), hn::LoadU(d, sd + j + lanes)));
    StoreF2(Tag(), d, r0, r1, x + j);
  }
  return j;
}

// m interleaved pairs starting at x (2m channels). c/s: the m effective coefficients; cd/sd: the same,
// duplicated and signed (2m entries).
template <class Tag>
HWY_INLINE void InterleavedPairs(typename Tag::T* x, const float* c, const float* s, const float* cd,
                                 const float* sd, int64_t m) {
  const int64_t n = 2 * m;
  if constexpr (HWY_LANES(float) >= 2) {
    int64_t j = InterleavedLoop2<Tag>(x, cd, sd, n);
    j = InterleavedLoop<Tag>(hn::ScalableTag<float>(), x, cd, sd, j, n);
    if (j == n) return;
    if constexpr (HWY_LANES(float) > 8) j = InterleavedLoop<Tag>(hn::CappedTag<float, 8>(), x, cd, sd, j, n);
    if constexpr (HWY_LANES(float) > 4) j = InterleavedLoop<Tag>(hn::CappedTag<float, 4>(), x, cd, sd, j, n);
    InterleavedLoop<Tag>(hn::CappedTag<float, 2>(), x, cd, sd, j, n);
  } else {
    // 1-lane SCALAR target: a pair never fits one vector; same formula on plain floats.
    (void)cd;
    (void)sd;
    for (int64_t i = 0; i < m; ++i) {
      const float a = LoadS(Tag(), x + 2 * i), b = LoadS(Tag(), x + 2 * i + 1);
      const float ra = a * c[i] - b * s[i];
      const float rb = a * s[i] + b * c[i];
      StoreS(Tag(), ra, x + 2 * i);
      StoreS(Tag(), rb, x + 2 * i + 1);
    }
  }
}

// ---- several small heads per vector --------------------------------------------------------------------

// Whether x's heads are rotated several per vector: 2*half <= lanes and divides it, heads contiguous
// (head_stride == 2*half, which also means head_dim == 2*half: nothing passes through).
HWY_INLINE bool CrossHeads(const RopeKernelArgs& x) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  const int64_t p = 2 * x.half;
  return lanes >= 2 && p <= lanes && lanes % p == 0 && x.head_stride == p && x.n_heads * p >= lanes;
}

// The lane pattern of the several-heads-per-vector path, fixed per call: lane j of a vector that starts at a
// head boundary holds channel jj = j mod 2*half of some head; it uses pair src[j]'s coefficients with the
// sine's sign sign[j] (-1 for the first member of a pair), and its partner sits in lane idx[j].
struct LanePattern {
  HWY_ALIGN int32_t idx[HWY_LANES(float)];
  int32_t src[HWY_LANES(float)];
  float sign[HWY_LANES(float)];
};

template <RopeLayout kLayout>
HWY_INLINE void BuildLanePattern(int64_t half, LanePattern& lp) {
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
  const int64_t p = 2 * half;
  for (int64_t j = 0; j < lanes; ++j) {
    const int64_t jj = j % p;
    if constexpr (kLayout == RopeLayout::kHalfSplit) {
      const bool first = jj < half;
      lp.src[j] = static_cast<int32_t>(first ? jj : jj - half);
      lp.sign[j] = first ? -1.0f : 1.0f;
      lp.idx[j] = static_cast<int32_t>(j - jj + (first ? jj + half : jj - half));
    } else {
      lp.src[j] = static_cast<int32_t>(jj / 2);
      lp.sign[j] = jj % 2 == 0 ? -1.0f : 1.0f;
      lp.idx[j] = static_cast<int32_t>(j ^ 1);
    }
  }
}

// This token's pattern coefficients: pc[j] = c[src[j]], ps[j] = sign[j] * s[src[j]] (exact); src[j] < half, so
// the gathers stay inside the row.
HWY_INLINE void FillPattern(const LanePattern& lp, const float* c, const float* s, float* pc, float* ps) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const auto src = hn::LoadU(di, lp.src);
  hn::Store(hn::GatherIndex(d, c, src), d, pc);
  hn::Store(hn::Mul(hn::LoadU(d, lp.sign), hn::GatherIndex(d, s, src)), d, ps);
}

// n_vec whole vectors of contiguous heads starting at x: out = x * pc + partner(x) * ps.
template <class Tag, RopeLayout kLayout>
HWY_INLINE void FlatHeads(typename Tag::T* x, int64_t n_vec, const float* pc, const float* ps,
                          const int32_t* idx) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto cv = hn::Load(d, pc);
  const auto sv = hn::Load(d, ps);
  if constexpr (kLayout == RopeLayout::kHalfSplit) {
    const auto perm = hn::SetTableIndices(d, idx);
    int64_t v = 0;
    if constexpr (kUnroll2) {
      for (; v + 2 <= n_vec; v += 2) {
        const auto x0 = LoadF(Tag(), d, x + v * lanes), x1 = LoadF(Tag(), d, x + (v + 1) * lanes);
        StoreF2(Tag(), d, hn::MulAdd(x0, cv, hn::Mul(hn::TableLookupLanes(x0, perm), sv)),
                hn::MulAdd(x1, cv, hn::Mul(hn::TableLookupLanes(x1, perm), sv)), x + v * lanes);
      }
    }
    for (; v < n_vec; ++v) {
      const auto xv = LoadF(Tag(), d, x + v * lanes);
      StoreF(Tag(), d, hn::MulAdd(xv, cv, hn::Mul(hn::TableLookupLanes(xv, perm), sv)), x + v * lanes);
    }
  } else {
    (void)idx;
    int64_t v = 0;
    if constexpr (kUnroll2) {
      for (; v + 2 <= n_vec; v += 2) {
        const auto x0 = LoadF(Tag(), d, x + v * lanes), x1 = LoadF(Tag(), d, x + (v + 1) * lanes);
        StoreF2(Tag(), d, hn::MulAdd(x0, cv, hn::Mul(hn::Reverse2(d, x0), sv)),
                hn::MulAdd(x1, cv, hn::Mul(hn::Reverse2(d, x1), sv)), x + v * lanes);
      }
    }
    for (; v < n_vec; ++v) {
      const auto xv = LoadF(Tag(), d, x + v * lanes);
      StoreF(Tag(), d, hn::MulAdd(xv, cv, hn::Mul(hn::Reverse2(d, xv), sv)), x + v * lanes);
    }
  }
}

// cd = (c0, c0, c1, c1, ...), sd = (-s0, s0, -s1, s1, ...) for the interleaved layout (m pairs).
HWY_INLINE void DuplicatePairs(const float* c, const float* s, int64_t m, float* cd, float* sd) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + lanes <= m; i += lanes) {
    const auto cv = hn::LoadU(d, c + i);
    const auto sv = hn::LoadU(d, s + i);
    hn::StoreInterleaved2(cv, cv, d, cd + 2 * i);
    hn::StoreInterleaved2(hn::Neg(sv), sv, d, sd + 2 * i);
  }
  for (; i < m; ++i) {
    cd[2 * i] = cd[2 * i + 1] = c[i];
    sd[2 * i] = -s[i];
    sd[2 * i + 1] = s[i];
  }
}

// ---- tokens ----------------------------------------------------------------------------------------------

// Per-token coefficients for pairs [i0, i0 + m) (see the top of the file).
struct Coeffs {
  const float* c;      // [m] effective cos
  const float* s;      // [m] effective sin
  const float* cd;     // [2m] interleaved: c duplicated
  const float* sd;     // [2m] interleaved: (-s, +s) per pair
  const float* pc;     // [lanes] small heads: pattern cos
  const float* ps;     // [lanes] small heads: pattern signed sin
  const int32_t* idx;  // [lanes] small heads: partner lane
  bool words;          // bfloat16: this token may take the word path (coefficients finite)
  const float* ce;     // [m/2] half-split words: coefficients of the even pairs
  const float* co;     // [m/2] ... of the odd pairs
  const float* se;
  const float* so;
};

// How one tensor's heads are split between the several-heads-per-vector path and the per-head path.
struct HeadPlan {
  int64_t flat_vecs = 0;   // whole vectors of heads 0 .. flat_heads-1 (several heads per vector)
  int64_t flat_heads = 0;  // heads rotated that way; heads [flat_heads, n_heads) one by one
};

HWY_INLINE HeadPlan PlanHeads(const RopeKernelArgs& x) {
  HeadPlan plan;
  if (CrossHeads(x)) {
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
    const int64_t heads_per_vec = lanes / (2 * x.half);
    plan.flat_vecs = x.n_heads / heads_per_vec;
    plan.flat_heads = plan.flat_vecs * heads_per_vec;
  }
  return plan;
}

// bfloat16 word path for pairs [i0, i0 + m) of heads [h0, h1) of one token (base = the token's first element;
// heads head_stride elements apart, each of half pairs). Returns the first pair not done, the same for every
// head. A function of its own (not inlined into RotateTokens) so that the compiler keeps the rounding and
// unpacking constants and the coefficient vectors in registers across the heads: inlined, the constants were
// reloaded from the stack in every loop iteration.
template <RopeLayout kLayout>
HWY_NOINLINE int64_t WordHeadsBF16(uint16_t* base, int64_t h0, int64_t h1, int64_t head_stride, int64_t half,
                                   int64_t i0, int64_t m, const Coeffs& k, bool heads_inner) {
  if constexpr (kLayout == RopeLayout::kHalfSplit) {
    return HalfSplitWordsBF16(base + i0, base + half + i0, h0, h1, head_stride, k.ce, k.co, k.se, k.so, m,
                              heads_inner);
  } else {
    (void)half;
    return InterleavedWordsBF16(base + 2 * i0, h0, h1, head_stride, k.c, k.s, m, heads_inner);
  }
}

// Rotates pairs [i0, i0 + m) of every head of token t of x.
template <class Tag, RopeLayout kLayout>
// heads_inner: the bfloat16 word path loops over heads inside the loop over coefficient vectors (each vector
// loaded once for all heads: fewer instructions, the right order when the token's data is in L1, i.e. a
// decode call); otherwise head by head in address order, which cold multi-token calls stream faster (measured:
// the heads-inner order cost prefill_q_4096x32x128 bf16 about 20%). Both orders compute the same bits.
HWY_INLINE void RotateHeads(const RopeKernelArgs& x, const HeadPlan& plan, int64_t t, int64_t i0, int64_t m,
                            const Coeffs& k, bool heads_inner) {
  using T = typename Tag::T;
  T* base = static_cast<T*>(x.data) + t * x.token_stride;
  if (plan.flat_vecs > 0) FlatHeads<Tag, kLayout>(base, plan.flat_vecs, k.pc, k.ps, k.idx);  // i0 == 0, m == half
  int64_t done = 0;  // pairs the bfloat16 word path rotated (in every head)
  if constexpr (std::is_same_v<Tag, StoreBF16> && kBf16Words) {
    if (k.words && plan.flat_heads < x.n_heads) {
      done = WordHeadsBF16<kLayout>(base, plan.flat_heads, x.n_heads, x.head_stride, x.half, i0, m, k,
                                    heads_inner);
      if (done == m) return;
    }
  }
  for (int64_t h = plan.flat_heads; h < x.n_heads; ++h) {
    T* head = base + h * x.head_stride;
    if constexpr (kLayout == RopeLayout::kHalfSplit) {
      HalfSplitPairs<Tag>(head + i0 + done, head + x.half + i0 + done, k.c + done, k.s + done, m - done);
    } else {
      InterleavedPairs<Tag>(head + 2 * (i0 + done), k.c + done, k.s + done, k.cd + 2 * done, k.sd + 2 * done,
                            m - done);
    }
  }
}

// Tokens [t0, t1) of q and (if k is non-null) of k, same dtype `Tag`, in one pass.
template <class Tag, RopeLayout kLayout>
void RotateTokens(const RopeKernelArgs& q, const RopeKernelArgs* k, int64_t t0, int64_t t1) {
  const int64_t half = q.half;
  const HeadPlan plan_q = PlanHeads(q);
  const HeadPlan plan_k = k != nullptr ? PlanHeads(*k) : HeadPlan();
  const bool cross = plan_q.flat_vecs > 0 || plan_k.flat_vecs > 0;
  // Forward reads the table row directly; backward and inverse prepare coefficients per token.
  const bool direct = q.direction == RopeDirection::kForward;
  const bool heads_inner = t1 - t0 == 1;  // one token (decode): see RotateHeads
  HWY_ALIGN float c_buf[kChunk];
  HWY_ALIGN float s_buf[kChunk];
  HWY_ALIGN float cd_buf[2 * kChunk];
  HWY_ALIGN float sd_buf[2 * kChunk];
  HWY_ALIGN float pc[HWY_LANES(float)];
  HWY_ALIGN float ps[HWY_LANES(float)];
  HWY_ALIGN float c_fly[kChunk];  // on the fly: this token's cos/sin
  HWY_ALIGN float s_fly[kChunk];
  HWY_ALIGN float ce_buf[kChunk / 2];  // bfloat16 half-split words: even / odd pair coefficients
  HWY_ALIGN float co_buf[kChunk / 2];
  HWY_ALIGN float se_buf[kChunk / 2];
  HWY_ALIGN float so_buf[kChunk / 2];
  LanePattern lp;
  if (cross) BuildLanePattern<kLayout>(half, lp);
  // Whether some head is rotated on its own (the interleaved path then needs cd/sd).
  const bool per_head = plan_q.flat_heads < q.n_heads || (k != nullptr && plan_k.flat_heads < k->n_heads);
  const bool fly = q.inv_freq != nullptr;
  Coeffs co{nullptr, nullptr, cd_buf, sd_buf, pc, ps, lp.idx, false, ce_buf, co_buf, se_buf, so_buf};
  for (int64_t t = t0; t < t1; ++t) {
    const float* cos_row = fly ? c_fly : q.cos + q.rows[t] * half;
    const float* sin_row = fly ? s_fly : q.sin + q.rows[t] * half;
    for (int64_t i0 = 0; i0 < half; i0 += kChunk) {
      const int64_t m = std::min(kChunk, half - i0);
      const float* c = cos_row + i0;
      const float* s = sin_row + i0;
      if (fly) {  // the chunk's coefficients, once for all heads of q and k
        kernels::SinCosRow(q.inv_freq + i0, m, q.rows[t], q.attention_factor, q.precision, c_fly, s_fly);
        c = c_fly;
        s = s_fly;
      }
      if (direct) {
        co.c = c;
        co.s = s;
      } else {
        if (q.direction == RopeDirection::kBackward) {
          for (int64_t i = 0; i < m; ++i) c_buf[i] = c[i], s_buf[i] = -s[i];
        } else {  // kInverse
          for (int64_t i = 0; i < m; ++i) {
            const float inv_norm = 1.0f / (c[i] * c[i] + s[i] * s[i]);  // as the scalar reference
            c_buf[i] = c[i] * inv_norm;
            s_buf[i] = -(s[i] * inv_norm);
          }
        }
        co.c = c_buf;
        co.s = s_buf;
      }
      if constexpr (std::is_same_v<Tag, StoreBF16> && kBf16Words) {
        co.words = per_head && !AnyNonFinite(co.c, co.s, m);
        if (co.words && kLayout == RopeLayout::kHalfSplit) SplitEvenOdd(co.c, co.s, m, ce_buf, co_buf, se_buf, so_buf);
      }
      if constexpr (kLayout == RopeLayout::kInterleaved) {
        // (the bfloat16 word path needs cd/sd only for a tail of less than a vector)
        const int64_t lanes = static_cast<int64_t>(hn::Lanes(hn::ScalableTag<float>()));
        if (per_head && !(co.words && m % lanes == 0)) DuplicatePairs(co.c, co.s, m, cd_buf, sd_buf);
      }
      if (cross) FillPattern(lp, co.c, co.s, pc, ps);
      RotateHeads<Tag, kLayout>(q, plan_q, t, i0, m, co, heads_inner);
      if (k != nullptr) RotateHeads<Tag, kLayout>(*k, plan_k, t, i0, m, co, heads_inner);
    }
  }
}

template <class Tag>
void RotateTokensLayout(const RopeKernelArgs& q, const RopeKernelArgs* k, int64_t t0, int64_t t1) {
  if (q.layout == RopeLayout::kHalfSplit) {
    RotateTokens<Tag, RopeLayout::kHalfSplit>(q, k, t0, t1);
  } else {
    RotateTokens<Tag, RopeLayout::kInterleaved>(q, k, t0, t1);
  }
}

// Tokens [t0, t1) of x with the scalar reference.
void ScalarTokens(const RopeKernelArgs& x, int64_t t0, int64_t t1) {
  RopeKernelArgs part = x;
  part.data = static_cast<char*>(x.data) + t0 * x.token_stride * DTypeSize(x.dtype);
  part.rows = x.rows + t0;
  part.n_tokens = t1 - t0;
  kernels::RopeKernelScalar(part);
}

// Entry point per target: tokens [t0, t1) of q and, if k is non-null, of k (same dtype and rows).
void RopeTokensImpl(const RopeKernelArgs& q, const RopeKernelArgs* k, int64_t t0, int64_t t1) {
  HWY_DASSERT(q.half >= 1 && 0 <= t0 && t0 <= t1 && t1 <= q.n_tokens);
  HWY_DASSERT(k == nullptr || (k->dtype == q.dtype && k->rows == q.rows && k->half == q.half && k->cos == q.cos &&
                               k->sin == q.sin && k->layout == q.layout && k->direction == q.direction &&
                               k->n_tokens == q.n_tokens && k->inv_freq == q.inv_freq &&
                               k->attention_factor == q.attention_factor && k->precision == q.precision));
  switch (q.dtype) {
    case DType::kF32:
      RotateTokensLayout<StoreF32>(q, k, t0, t1);
      break;
    case DType::kBF16:
      RotateTokensLayout<StoreBF16>(q, k, t0, t1);
      break;
    case DType::kF16:
      if constexpr (kNativeF16) {
        RotateTokensLayout<StoreF16>(q, k, t0, t1);
      } else {
        ScalarTokens(q, t0, t1);
        if (k != nullptr) ScalarTokens(*k, t0, t1);
      }
      break;
  }
}

int64_t RopeTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(RopeTokensImpl);
HWY_EXPORT(RopeTargetImpl);

namespace kernels {
namespace {

// Bytes of rotated channels read and written.
int64_t MovedBytes(const RopeKernelArgs& x) {
  return 2 * x.n_tokens * x.n_heads * 2 * x.half * DTypeSize(x.dtype);
}

// Token blocks of about this many bytes moved are handed out to threads one at a time (dynamic schedule),
// so a thread the OS delays (shared machines) holds up at most one block, not a fixed share of the call.
constexpr int64_t kBlockBytes = int64_t{256} << 10;

// Splits tokens over OpenMP threads for large calls; small ones (decode) run here without touching OpenMP.
void RunSimd(const RopeKernelArgs& q, const RopeKernelArgs* k) {
  const int64_t bytes = MovedBytes(q) + (k != nullptr ? MovedBytes(*k) : 0);
  int64_t threads = 1;
  if (q.n_tokens >= 2 && bytes >= kRopeParallelMinBytes && !omp_in_parallel()) {
    threads = std::min<int64_t>(
        {static_cast<int64_t>(omp_get_max_threads()), bytes / (kRopeParallelMinBytes / 2), q.n_tokens});
  }
  if (threads <= 1) {
    HWY_DYNAMIC_DISPATCH(RopeTokensImpl)(q, k, 0, q.n_tokens);
    return;
  }
  const int64_t bytes_per_token = std::max<int64_t>(bytes / q.n_tokens, 1);
  const int64_t block = std::max<int64_t>(kBlockBytes / bytes_per_token, 1);
  const int64_t n_blocks = (q.n_tokens + block - 1) / block;
  const int n_threads = static_cast<int>(threads);
  HWY_DYNAMIC_DISPATCH(RopeTargetImpl)();  // initialise the dispatch target once, before the threads use it
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (int64_t b = 0; b < n_blocks; ++b) {
    HWY_DYNAMIC_DISPATCH(RopeTokensImpl)(q, k, b * block, std::min(q.n_tokens, (b + 1) * block));
  }
}

constexpr int kPathUnset = -1;
std::atomic<int> g_path{kPathUnset};

int PathFromEnvironment() {
  const char* env = std::getenv("POSENC_KERNEL");
  return (env != nullptr && std::string_view(env) == "scalar") ? static_cast<int>(RopeKernelPath::kScalar)
                                                               : static_cast<int>(RopeKernelPath::kAuto);
}

}  // namespace

void SetRopeKernelPath(RopeKernelPath path) { g_path.store(static_cast<int>(path), std::memory_order_relaxed); }

RopeKernelPath GetRopeKernelPath() {
  int p = g_path.load(std::memory_order_relaxed);
  if (p == kPathUnset) {
    int expected = kPathUnset;
    g_path.compare_exchange_strong(expected, PathFromEnvironment(), std::memory_order_relaxed);
    p = g_path.load(std::memory_order_relaxed);
  }
  return static_cast<RopeKernelPath>(p);
}

const char* RopeKernelTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(RopeTargetImpl)()); }

void RopeKernelSimd(const RopeKernelArgs& args) {
  if (args.n_tokens <= 0 || args.n_heads <= 0) return;
  RunSimd(args, nullptr);
}

void RopeKernelQK(const RopeKernelArgs& q, const RopeKernelArgs& k) {
  const bool has_q = q.n_tokens > 0 && q.n_heads > 0;
  const bool has_k = k.n_tokens > 0 && k.n_heads > 0;
  if (GetRopeKernelPath() == RopeKernelPath::kScalar) {
    if (has_q) RopeKernelScalar(q);
    if (has_k) RopeKernelScalar(k);
    return;
  }
  if (has_q && has_k && q.dtype == k.dtype) {
    RunSimd(q, &k);
    return;
  }
  if (has_q) RunSimd(q, nullptr);
  if (has_k) RunSimd(k, nullptr);
}

void RopeKernel(const RopeKernelArgs& args) {
  if (GetRopeKernelPath() == RopeKernelPath::kScalar) {
    RopeKernelScalar(args);
  } else {
    RopeKernelSimd(args);
  }
}

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
