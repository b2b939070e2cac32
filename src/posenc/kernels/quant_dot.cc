// Highway kernels over ggml block-quantized weight rows (DequantizeRows, QuantDotRows): compiled once per x86
// target by foreach_target.h, picked at run time. The scalar twins live in quant_dot_scalar.cc.
//
// Each block type has a decoder that turns one block into float32 vectors, lane group by lane group, with
// DequantizeRow's float32 operations in its order (kernels/dequant.cc; ggml-quants.c `dequantize_row_*`), and
// hands each vector to a sink: the store sink writes it out (DequantizeRows), the dot sink multiplies it with up
// to four activation rows and accumulates (QuantDotRows). Per-block scales (d * sc, dmin * m) are formed in
// scalar float32 exactly as the reference forms them, then broadcast. Lane counts 1 (SCALAR), 4, 8 and 16 all
// divide the 16- and 32-value groups the decoders step through, so no block needs a tail.
#include "posenc/kernels/quant_dot.h"

#include <cstring>

#include "posenc/core/dtype.h"
#include "posenc/kernels/dequant.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/quant_dot.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using DU = hn::RebindToUnsigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;

// 1 << k for k < 32: per-lane bit masks for the fifth bit of Q5_0 / Q5_1 codes.
alignas(64) constexpr uint32_t kBitOf[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,  1u << 8,  1u << 9,  1u << 10,
    1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15, 1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21,
    1u << 22, 1u << 23, 1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31};

// A binary16 scale as F16ToF32 converts it, inline for the normal numbers every block's scale is in practice
// (zero, subnormals, infinities and NaN go to F16ToF32).
HWY_INLINE float HalfAt(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  const uint32_t exp = (h >> 10) & 0x1Fu;
  if (exp == 0 || exp == 31) return F16ToF32(h);
  const uint32_t bits = (static_cast<uint32_t>(h & 0x8000u) << 16) | ((exp + 112u) << 23) | ((h & 0x3FFu) << 13);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Lanes(DF) consecutive bytes widened to int32 lanes: signed (int8 codes) or unsigned (packed nibbles, bits).
HWY_INLINE VI SignedBytes(const uint8_t* p) {
  const hn::Rebind<int8_t, DF> d8;
  return hn::PromoteTo(DI(), hn::LoadU(d8, reinterpret_cast<const int8_t*>(p)));
}
HWY_INLINE VI UnsignedBytes(const uint8_t* p) {
  const hn::Rebind<uint8_t, DF> du8;
  return hn::PromoteTo(DI(), hn::LoadU(du8, p));
}

// IEEE binary16 bits (in the low half of each uint32 lane) to float32, as F16ToF32 does: exact for normal and
// subnormal values, infinities kept, every NaN the quiet NaN 0x7fc00000 with the sign bit.
HWY_INLINE VF F16Lanes(hn::Vec<DU> h) {
  const DF df;
  const DU du;
  const DI di;
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exp = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto man = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exp, hn::Set(du, 112u))), hn::ShiftLeft<13>(man));
  // man * 2^-24: exact (man < 2^10), the value of a zero or subnormal half.
  const auto small = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, man)), hn::Set(df, 0x1p-24f)));
  const auto inf_nan = hn::IfThenElse(hn::Eq(man, hn::Zero(du)), hn::Set(du, 0x7f800000u), hn::Set(du, 0x7fc00000u));
  auto magnitude = hn::IfThenElse(hn::Eq(exp, hn::Zero(du)), small, normal);
  magnitude = hn::IfThenElse(hn::Eq(exp, hn::Set(du, 31u)), inf_nan, magnitude);
  return hn::BitCast(df, hn::Or(magnitude, sign));
}

// ---- decoders ----------------------------------------------------------------------------------------------
// Plain types (kPlain): Load(w, j) gives values j .. j + Lanes - 1, Scalar(w, j) value j. Block types: kBlock
// values in kBytes bytes; Decode(block, sink) calls sink(j, v) with v = values j .. j + Lanes - 1 of the block,
// every j of the block once (in any order).

struct DecF32 {
  static constexpr bool kPlain = true;
  static HWY_INLINE VF Load(const uint8_t* w, int64_t j) {
    return hn::LoadU(DF(), reinterpret_cast<const float*>(w) + j);
  }
  static float Scalar(const uint8_t* w, int64_t j) {
    float v;
    std::memcpy(&v, w + 4 * j, 4);
    return v;
  }
};

// binary16: AVX2 and AVX3 convert in hardware (F16C, exact) and only NaN is rewritten to F16ToF32's quiet NaN;
// the other targets, whose Highway emulation turns infinities and NaN into finite numbers, use F16Lanes.
struct DecF16 {
  static constexpr bool kPlain = true;
  static HWY_INLINE VF Load(const uint8_t* w, int64_t j) {
#if HWY_TARGET <= HWY_AVX2
    const DF df;
    const DU du;
    const hn::Rebind<hwy::float16_t, DF> dh;
    const VF v = hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(w) + j));
    const auto quiet_nan = hn::Or(hn::And(hn::BitCast(du, v), hn::Set(du, 0x80000000u)), hn::Set(du, 0x7fc00000u));
    return hn::IfThenElse(hn::IsNaN(v), hn::BitCast(df, quiet_nan), v);
#else
    const hn::Rebind<uint16_t, DF> d16;
    return F16Lanes(hn::PromoteTo(DU(), hn::LoadU(d16, reinterpret_cast<const uint16_t*>(w) + j)));
#endif
  }
  static float Scalar(const uint8_t* w, int64_t j) { return HalfAt(w + 2 * j); }
};

// bfloat16: the upper half of a float32 (exact).
struct DecBF16 {
  static constexpr bool kPlain = true;
  static HWY_INLINE VF Load(const uint8_t* w, int64_t j) {
    const hn::Rebind<uint16_t, DF> d16;
    const auto bits = hn::PromoteTo(DU(), hn::LoadU(d16, reinterpret_cast<const uint16_t*>(w) + j));
    return hn::BitCast(DF(), hn::ShiftLeft<16>(bits));
  }
  static float Scalar(const uint8_t* w, int64_t j) {
    uint16_t h;
    std::memcpy(&h, w + 2 * j, 2);
    return BF16ToF32(h);
  }
};

// block_q8_0 { half d; int8 qs[32]; }: y = float(q) * d.
struct DecQ8_0 {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 32, kBytes = 34;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const auto d = hn::Set(df, HalfAt(b));
    for (size_t j = 0; j < 32; j += hn::Lanes(df)) sink(j, hn::Mul(hn::ConvertTo(df, SignedBytes(b + 2 + j)), d));
  }
};

// Q4_0 / Q4_1 / Q5_0 / Q5_1: { half d; [half m;] [uint8 qh[4];] uint8 qs[16]; }. Value j < 16 is the low nibble
// of qs[j], value j + 16 the high nibble; Q5 adds bit j of qh (little-endian) as bit 4. Without a min:
// y = float(q - 2^(bits-1)) * d; with one: y = float(q) * d + m (product, then sum).
template <bool kHasMin, int kBits>
struct DecLegacy {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 32;
  static constexpr int64_t kHighOffset = 2 + (kHasMin ? 2 : 0);
  static constexpr int64_t kBytes = kHighOffset + (kBits == 5 ? 4 : 0) + 16;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const DI di;
    const DU du;
    const auto d = hn::Set(df, HalfAt(b));
    const auto m = hn::Set(df, kHasMin ? HalfAt(b + 2) : 0.0f);
    uint32_t qh = 0;
    if constexpr (kBits == 5) std::memcpy(&qh, b + kHighOffset, 4);
    const uint8_t* qs = b + kBytes - 16;
    const auto value = [&](VI q) HWY_ATTR {
      if constexpr (kHasMin) {
        return hn::Add(hn::Mul(hn::ConvertTo(df, q), d), m);
      } else {
        return hn::Mul(hn::ConvertTo(df, hn::Sub(q, hn::Set(di, 1 << (kBits - 1)))), d);
      }
    };
    for (size_t j = 0; j < 16; j += hn::Lanes(df)) {
      const VI bytes = UnsignedBytes(qs + j);
      VI lo = hn::And(bytes, hn::Set(di, 0xF));
      VI hi = hn::ShiftRight<4>(bytes);
      if constexpr (kBits == 5) {
        const auto bits = hn::Set(du, qh);
        const auto sixteen = hn::Set(du, 16u);
        lo = hn::Or(lo, hn::BitCast(di, hn::IfThenElseZero(hn::TestBit(bits, hn::LoadU(du, kBitOf + j)), sixteen)));
        hi = hn::Or(hi, hn::BitCast(di, hn::IfThenElseZero(hn::TestBit(bits, hn::LoadU(du, kBitOf + 16 + j)),
                                                           sixteen)));
      }
      sink(j, value(lo));
      sink(j + 16, value(hi));
    }
  }
};

// block_iq4_nl { half d; uint8 qs[16]; }: nibbles as Q4_0, y = d * kvalues_iq4nl[q]. The 16 code values fit in
// int8: a byte shuffle (TableLookupBytes) maps the 32 codes to their values, which are then widened as Q8_0's.
struct DecIq4Nl {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 32, kBytes = 18;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    alignas(16) uint8_t values[32];
#if HWY_TARGET == HWY_SCALAR
    for (int j = 0; j < 16; ++j) {
      values[j] = static_cast<uint8_t>(kIq4nlValues[b[2 + j] & 0xF]);
      values[j + 16] = static_cast<uint8_t>(kIq4nlValues[b[2 + j] >> 4]);
    }
#else
    const hn::Full128<uint8_t> d8;
    const auto table = hn::LoadU(d8, reinterpret_cast<const uint8_t*>(kIq4nlValues));
    const auto q = hn::LoadU(d8, b + 2);
    hn::Store(hn::TableLookupBytes(table, hn::And(q, hn::Set(d8, uint8_t{0xF}))), d8, values);
    hn::Store(hn::TableLookupBytes(table, hn::ShiftRight<4>(q)), d8, values + 16);
#endif
    const auto d = hn::Set(df, HalfAt(b));
    for (size_t j = 0; j < 32; j += hn::Lanes(df)) sink(j, hn::Mul(d, hn::ConvertTo(df, SignedBytes(values + j))));
  }
};

// Q2_K and Q3_K share a value layout: value 128h + 32k + 16c + l (h < 2, k < 4, c < 2, l < 16) has its 2 low bits
// at bits 2k, 2k + 1 of qs[32h + 16c + l] and belongs to sub-block s = 8h + 2k + c (16 values each). Calls
// f(s, plane = 4h + k, byte = 16c + l, value, low_bits) for each group of Lanes values.
template <class F>
HWY_INLINE void ForEachTwoBitGroup(const uint8_t* qs, F&& f) {
  const DF df;
  const DI di;
  for (int h = 0; h < 2; ++h) {
    for (int k = 0; k < 4; ++k) {
      for (int c = 0; c < 2; ++c) {
        for (size_t l = 0; l < 16; l += hn::Lanes(df)) {
          const size_t byte = static_cast<size_t>(16 * c) + l;
          const VI low = hn::And(hn::ShiftRightSame(UnsignedBytes(qs + 32 * h + byte), 2 * k), hn::Set(di, 3));
          f(8 * h + 2 * k + c, 4 * h + k, byte, static_cast<size_t>(128 * h + 32 * k) + byte, low);
        }
      }
    }
  }
}

// block_q2_K { uint8 scales[16]; uint8 qs[64]; half d; half dmin; }: sub-block s has scale d * (scales[s] & 15)
// and min dmin * (scales[s] >> 4); y = scale * q - min.
struct DecQ2K {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 256, kBytes = 84;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const float d = HalfAt(b + 80), dmin = HalfAt(b + 82);
    float scale[16], min[16];
    for (int s = 0; s < 16; ++s) {
      scale[s] = d * static_cast<float>(b[s] & 0xF);
      min[s] = dmin * static_cast<float>(b[s] >> 4);
    }
    ForEachTwoBitGroup(b + 16, [&](int s, int /*plane*/, size_t /*byte*/, size_t value, VI low) HWY_ATTR {
      sink(value, hn::Sub(hn::Mul(hn::Set(df, scale[s]), hn::ConvertTo(df, low)), hn::Set(df, min[s])));
    });
  }
};

// block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; half d; }: layout as Q2_K; bit `plane` of
// hmask[byte] clear subtracts 4 from the code; y = (d * scale_s) * q.
struct DecQ3K {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 256, kBytes = 110;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const DI di;
    const float d = HalfAt(b + 108);
    float scale[16];
    for (int s = 0; s < 16; ++s) scale[s] = d * static_cast<float>(Q3KScale(b + 96, s));
    ForEachTwoBitGroup(b + 32, [&](int s, int plane, size_t byte, size_t value, VI low) HWY_ATTR {
      const auto set = hn::TestBit(UnsignedBytes(b + byte), hn::Set(di, 1 << plane));
      const VI code = hn::Sub(low, hn::IfThenZeroElse(set, hn::Set(di, 4)));
      sink(value, hn::Mul(hn::Set(df, scale[s]), hn::ConvertTo(df, code)));
    });
  }
};

// block_q4_K { half d; half dmin; uint8 scales[12]; uint8 qs[128]; } and block_q5_K (uint8 qh[32] before qs):
// sub-block s = 2p + h (p < 4 pairs, h = 0 low nibbles / 1 high nibbles of qs[32p .. 32p + 31]) holds values
// 32s .. 32s + 31; y = (d * sc_s) * q - dmin * m_s, Q5_K adding 16 to q when bit s of qh[l] is set.
template <bool kFifthBit>
struct DecQ45K {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 256, kBytes = kFifthBit ? 176 : 144;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const DI di;
    const float d = HalfAt(b), dmin = HalfAt(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + (kFifthBit ? 48 : 16);
    for (int p = 0; p < 4; ++p, ql += 32) {
      for (int h = 0; h < 2; ++h) {
        const int s = 2 * p + h;
        int sc, m;
        ScaleMinK4(s, scales, &sc, &m);
        const auto dl = hn::Set(df, d * static_cast<float>(sc));
        const auto ml = hn::Set(df, dmin * static_cast<float>(m));
        for (size_t l = 0; l < 32; l += hn::Lanes(df)) {
          const VI bytes = UnsignedBytes(ql + l);
          VI code = h ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(di, 0xF));
          if constexpr (kFifthBit) {
            const auto set = hn::TestBit(UnsignedBytes(qh + l), hn::Set(di, 1 << s));
            code = hn::Add(code, hn::IfThenElseZero(set, hn::Set(di, 16)));
          }
          sink(static_cast<size_t>(32 * s) + l, hn::Sub(hn::Mul(dl, hn::ConvertTo(df, code)), ml));
        }
      }
    }
  }
};

// block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d; }: per half (128 values) and l < 32,
// value 32c + l has low 4 bits from ql[l + 32 (c & 1)] (low nibble for c < 2, high for c >= 2) and high 2 bits
// from qh[l] bits 2c, 2c + 1, minus 32; y = (d * scales[l / 16 + 2c]) * q.
struct DecQ6K {
  static constexpr bool kPlain = false;
  static constexpr int64_t kBlock = 256, kBytes = 210;
  template <class Sink>
  static HWY_INLINE void Decode(const uint8_t* b, Sink& sink) {
    const DF df;
    const DI di;
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = HalfAt(b + 208);
    const auto low4 = hn::Set(di, 0xF), two = hn::Set(di, 3), bias = hn::Set(di, 32);
    for (size_t half = 0; half < 2; ++half, ql += 64, qh += 32, sc += 8) {
      for (size_t l = 0; l < 32; l += hn::Lanes(df)) {
        const size_t is = l / 16;  // Lanes divides 16: the group never straddles two scales
        const VI a = UnsignedBytes(ql + l), c = UnsignedBytes(ql + l + 32), hb = UnsignedBytes(qh + l);
        const VI q1 = hn::Sub(hn::Or(hn::And(a, low4), hn::ShiftLeft<4>(hn::And(hb, two))), bias);
        const VI q2 = hn::Sub(hn::Or(hn::And(c, low4), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(hb), two))), bias);
        const VI q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(a), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(hb), two))), bias);
        const VI q4 = hn::Sub(hn::Or(hn::ShiftRight<4>(c), hn::ShiftLeft<4>(hn::ShiftRight<6>(hb))), bias);
        const size_t base = 128 * half + l;
        sink(base, hn::Mul(hn::Set(df, d * static_cast<float>(sc[is])), hn::ConvertTo(df, q1)));
        sink(base + 32, hn::Mul(hn::Set(df, d * static_cast<float>(sc[is + 2])), hn::ConvertTo(df, q2)));
        sink(base + 64, hn::Mul(hn::Set(df, d * static_cast<float>(sc[is + 4])), hn::ConvertTo(df, q3)));
        sink(base + 96, hn::Mul(hn::Set(df, d * static_cast<float>(sc[is + 6])), hn::ConvertTo(df, q4)));
      }
    }
  }
};

// Calls f(Decoder{}) for the decoder of `type` (one of the types CanDequantize accepts).
template <class F>
HWY_INLINE void WithDecoder(GgmlType type, F&& f) {
  switch (type) {
    case GgmlType::kF32: f(DecF32{}); break;
    case GgmlType::kF16: f(DecF16{}); break;
    case GgmlType::kBF16: f(DecBF16{}); break;
    case GgmlType::kQ8_0: f(DecQ8_0{}); break;
    case GgmlType::kQ4_0: f(DecLegacy<false, 4>{}); break;
    case GgmlType::kQ4_1: f(DecLegacy<true, 4>{}); break;
    case GgmlType::kQ5_0: f(DecLegacy<false, 5>{}); break;
    case GgmlType::kQ5_1: f(DecLegacy<true, 5>{}); break;
    case GgmlType::kQ4_K: f(DecQ45K<false>{}); break;
    case GgmlType::kQ5_K: f(DecQ45K<true>{}); break;
    case GgmlType::kQ6_K: f(DecQ6K{}); break;
    case GgmlType::kQ2_K: f(DecQ2K{}); break;
    case GgmlType::kQ3_K: f(DecQ3K{}); break;
    case GgmlType::kIQ4_NL: f(DecIq4Nl{}); break;
    default: break;  // the callers validated the type
  }
}

// Walks one row: sink.base is set to each block's first value index before its Decode; plain types go in whole
// vectors, then sink.Scalar(j, value) for the values past the last whole vector.
template <class Dec, class Sink>
HWY_INLINE void DecodeRow(const uint8_t* w, int64_t in, Sink& sink) {
  if constexpr (Dec::kPlain) {
    const int64_t lanes = static_cast<int64_t>(hn::Lanes(DF()));
    sink.base = 0;
    int64_t j = 0;
    for (; j + lanes <= in; j += lanes) sink(static_cast<size_t>(j), Dec::Load(w, j));
    for (; j < in; ++j) sink.Scalar(j, Dec::Scalar(w, j));
  } else {
    const int64_t nb = in / Dec::kBlock;
    for (int64_t b = 0; b < nb; ++b) {
      sink.base = b * Dec::kBlock;
      Dec::Decode(w + b * Dec::kBytes, sink);
    }
  }
}

struct StoreSink {
  float* dst;
  int64_t base = 0;
  HWY_INLINE void operator()(size_t j, VF v) { hn::StoreU(v, DF(), dst + base + static_cast<int64_t>(j)); }
  HWY_INLINE void Scalar(int64_t j, float v) { dst[j] = v; }
};

// Accumulates decoded vectors times kRows activation rows. Two accumulators per row, swapped after every call
// (a register rename once the decoder's loops are unrolled), halve the dependency chain of the multiply-adds.
template <int kRows>
struct DotSink {
  const float* x[kRows];
  int64_t base = 0;
  VF acc[kRows], other[kRows];
  float tail[kRows];
  HWY_INLINE void operator()(size_t j, VF v) {
    const DF df;
    for (int r = 0; r < kRows; ++r) {
      const VF sum = hn::MulAdd(v, hn::LoadU(df, x[r] + base + static_cast<int64_t>(j)), acc[r]);
      acc[r] = other[r];
      other[r] = sum;
    }
  }
  HWY_INLINE void Scalar(int64_t j, float v) {
    for (int r = 0; r < kRows; ++r) tail[r] += x[r][j] * v;
  }
};

template <class Dec, int kRows>
HWY_INLINE void DotRowGroup(const uint8_t* w, int64_t in, const float* x, float* y, int64_t ldy) {
  const DF df;
  DotSink<kRows> sink;
  for (int r = 0; r < kRows; ++r) {
    sink.x[r] = x + r * in;
    sink.acc[r] = hn::Zero(df);
    sink.other[r] = hn::Zero(df);
    sink.tail[r] = 0.0f;
  }
  DecodeRow<Dec>(w, in, sink);
  for (int r = 0; r < kRows; ++r) {
    y[r * ldy] = hn::GetLane(hn::SumOfLanes(df, hn::Add(sink.acc[r], sink.other[r]))) + sink.tail[r];
  }
}

void QuantDotRowsImpl(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, const float* x,
                      int64_t n, float* y, int64_t ldy) {
  WithDecoder(type, [&](auto dec) HWY_ATTR {
    using Dec = decltype(dec);
    for (int64_t r = 0; r < rows; ++r) {
      const uint8_t* wr = static_cast<const uint8_t*>(w) + r * row_bytes;
      int64_t i = 0;
      for (; i + 4 <= n; i += 4) DotRowGroup<Dec, 4>(wr, in, x + i * in, y + i * ldy + r, ldy);
      for (; i < n; ++i) DotRowGroup<Dec, 1>(wr, in, x + i * in, y + i * ldy + r, ldy);
    }
  });
}

void DequantizeRowsImpl(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, float* dst,
                        int64_t ld_dst) {
  WithDecoder(type, [&](auto dec) HWY_ATTR {
    using Dec = decltype(dec);
    for (int64_t r = 0; r < rows; ++r) {
      StoreSink sink{dst + r * ld_dst};
      DecodeRow<Dec>(static_cast<const uint8_t*>(w) + r * row_bytes, in, sink);
    }
  });
}

int64_t QuantKernelTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(QuantDotRowsImpl);
HWY_EXPORT(DequantizeRowsImpl);
HWY_EXPORT(QuantKernelTargetImpl);

namespace kernels {

void DequantizeRows(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, float* dst,
                    int64_t ld_dst) {
  if (rows > 0 && in > 0) HWY_DYNAMIC_DISPATCH(DequantizeRowsImpl)(type, w, row_bytes, rows, in, dst, ld_dst);
}

void QuantDotRows(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, const float* x,
                  int64_t n, float* y, int64_t ldy) {
  if (rows <= 0 || n <= 0) return;
  if (in <= 0) {  // an empty sum
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t r = 0; r < rows; ++r) y[i * ldy + r] = 0.0f;
    }
    return;
  }
  HWY_DYNAMIC_DISPATCH(QuantDotRowsImpl)(type, w, row_bytes, rows, in, x, n, y, ldy);
}

const char* QuantKernelTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(QuantKernelTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
