#include "posenc/kernels/dequant.h"

#include <cstring>

#include <fmt/format.h>

#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

// Block layouts (ggml-common.h, QK_K = 256). Offsets are in bytes from the start of the block.
constexpr int kQK = 32;    // values per block of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL
constexpr int kQKK = 256;  // values per K-quant super-block

float Half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return F16ToF32(h);
}

// The 32 codes of a 32-value block with 4-bit codes: value j < 16 is the low nibble of qs[j], value j + 16 the
// high nibble (block_q4_0, block_q4_1, block_iq4_nl, and the low 4 bits of block_q5_0 / block_q5_1).
void Nibbles(const uint8_t* qs, int* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + kQK / 2] = qs[j] >> 4;
  }
}

// Adds the fifth bit of each code of a Q5_0 / Q5_1 block: bit k of qh (4 bytes, little-endian) is bit 4 of code k
// (ggml: xh_0 = ((qh >> j) << 4) & 0x10, xh_1 = (qh >> (j + 12)) & 0x10).
void AddFifthBits(const uint8_t* qh_bytes, int* q) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, 4);
  for (int k = 0; k < kQK; ++k) q[k] |= static_cast<int>((qh >> k) & 1u) << 4;
}

// The Q4_0 / Q4_1 / Q5_0 / Q5_1 family: { half d; [half m;] [uint8 qh[4];] uint8 qs[16]; } =
//   block_q4_0 (18 bytes): y = (q - 8) d        block_q4_1 (20 bytes): y = q d + m
//   block_q5_0 (22 bytes): y = (q - 16) d       block_q5_1 (24 bytes): y = q d + m
template <bool kHasMin, int kBits>
void RowLegacy(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kMinBytes = kHasMin ? 2 : 0, kHighBytes = kBits == 5 ? 4 : 0;
  constexpr int kBlockBytes = 2 + kMinBytes + kHighBytes + kQK / 2;
  constexpr int kOffset = 1 << (kBits - 1);  // subtracted when there is no min
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, x += kBlockBytes, y += kQK) {
    const float d = Half(x);
    Nibbles(x + 2 + kMinBytes + kHighBytes, q);
    if constexpr (kBits == 5) AddFifthBits(x + 2 + kMinBytes, q);
    if constexpr (kHasMin) {
      const float m = Half(x + 2);
      for (int k = 0; k < kQK; ++k) y[k] = static_cast<float>(q[k]) * d + m;
    } else {
      for (int k = 0; k < kQK; ++k) y[k] = static_cast<float>(q[k] - kOffset) * d;
    }
  }
}

// block_q8_0 { half d; int8 qs[32]; }: y = q d.
void RowQ8_0(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 34, y += kQK) {
    const float d = Half(x);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(static_cast<int8_t>(x[2 + j])) * d;
  }
}

// block_iq4_nl { half d; uint8 qs[16]; }: y = d kvalues_iq4nl[q].
void RowIq4Nl(const uint8_t* x, float* y, int64_t nb) {
  int q[kQK];
  for (int64_t i = 0; i < nb; ++i, x += 18, y += kQK) {
    const float d = Half(x);
    Nibbles(x + 2, q);
    for (int k = 0; k < kQK; ++k) y[k] = d * static_cast<float>(kIq4nlValues[q[k]]);
  }
}

// block_q2_K { uint8 scales[16]; uint8 qs[64]; half d; half dmin; }. Sub-block s (16 values) has scale
// d * (scales[s] & 15) and min dmin * (scales[s] >> 4); 2-bit codes: value 128h + 32k + 16b + l (h half,
// k shift index, b 0/1, l < 16) is bits 2k..2k+1 of qs[32h + 16b + l], sub-block 8h + 2k + b.
void RowQ2_K(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 84) {
    const uint8_t* scales = x;
    const uint8_t* q = x + 16;
    const float d = Half(x + 80);
    const float min = Half(x + 82);
    int is = 0;
    for (int n = 0; n < kQKK; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF);
          const float ml = min * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
        shift += 2;
      }
      q += 32;
    }
  }
}

// block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; half d; }. Value layout as Q2_K; the third
// bit of value 128h + 32k + 16b + l is bit (4h + k) of hmask[16b + l]: set means code q, clear means q - 4.
void RowQ3_K(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 110) {
    const uint8_t* hm = x;
    const uint8_t* q = x + 32;
    const uint8_t* packed = x + 96;
    const float d_all = Half(x + 108);
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < kQKK; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * static_cast<float>(Q3KScale(packed, is++));
          for (int l = 0; l < 16; ++l) {
            const int code = ((q[l + 16 * half] >> shift) & 3) - ((hm[l + 16 * half] & m) ? 0 : 4);
            *y++ = dl * static_cast<float>(code);
          }
        }
        shift += 2;
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  }
}

// block_q4_K { half d; half dmin; uint8 scales[12]; uint8 qs[128]; } and
// block_q5_K { half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }: per pair p of sub-blocks,
// value 64p + l (l < 32) = (d sc_{2p}) lo(qs[32p + l]) - dmin m_{2p}, value 64p + 32 + l uses hi(...) and
// sub-block 2p + 1; Q5_K adds 16 to the code of sub-block s's value l when bit s of qh[l] is set.
template <bool kFifthBit>
void RowQ4_5K(const uint8_t* x, float* y, int64_t nb) {
  constexpr int kBlockBytes = kFifthBit ? 176 : 144;
  for (int64_t i = 0; i < nb; ++i, x += kBlockBytes) {
    const float d = Half(x);
    const float min = Half(x + 2);
    const uint8_t* scales = x + 4;
    const uint8_t* qh = x + 16;  // Q5_K only
    const uint8_t* ql = x + (kFifthBit ? 48 : 16);
    for (int p = 0; p < 4; ++p, ql += 32) {
      for (int half = 0; half < 2; ++half) {
        const int s = 2 * p + half;
        int sc, m;
        ScaleMinK4(s, scales, &sc, &m);
        const float dl = d * static_cast<float>(sc), ml = min * static_cast<float>(m);
        for (int l = 0; l < 32; ++l) {
          int code = half ? ql[l] >> 4 : ql[l] & 0xF;
          if constexpr (kFifthBit) code += ((qh[l] >> s) & 1) ? 16 : 0;
          *y++ = dl * static_cast<float>(code) - ml;
        }
      }
    }
  }
}

// block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d; }: per 128 values (half h): value
// 32c + l (c = 0..3, l < 32) has low 4 bits from ql[64h + l + 32(c&1)] (low nibble for c < 2, high for c >= 2),
// high 2 bits from qh[32h + l] bits 2c..2c+1, minus 32; scale scales[8h + l/16 + 2c]; y = (d sc) q.
void RowQ6_K(const uint8_t* x, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += 210) {
    const uint8_t* ql = x;
    const uint8_t* qh = x + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(x + 192);
    const float d = Half(x + 208);
    for (int n = 0; n < kQKK; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

}  // namespace

bool CanDequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kQ8_0:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_NL: return true;
    default: return false;
  }
}

void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n) {
  if (!CanDequantize(type)) {
    throw ConfigError(fmt::format("tensor type {} cannot be dequantized (supported: f32, f16, bf16, q4_0, q4_1, "
                                  "q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl)",
                                  GgmlTypeName(type)));
  }
  const GgmlTypeTraits& t = GgmlTraits(type);
  if (n < 0 || n % t.block_size != 0) {
    throw ShapeError(fmt::format("DequantizeRow: n must be a non-negative multiple of the {} block size {}, got {}",
                                 t.name, t.block_size, n));
  }
  const auto* x = static_cast<const uint8_t*>(src);
  const int64_t nb = n / t.block_size;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, x, static_cast<size_t>(n) * 4); break;
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = Half(x + 2 * i);
      break;
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, x + 2 * i, 2);
        dst[i] = BF16ToF32(h);
      }
      break;
    case GgmlType::kQ4_0: RowLegacy<false, 4>(x, dst, nb); break;
    case GgmlType::kQ4_1: RowLegacy<true, 4>(x, dst, nb); break;
    case GgmlType::kQ5_0: RowLegacy<false, 5>(x, dst, nb); break;
    case GgmlType::kQ5_1: RowLegacy<true, 5>(x, dst, nb); break;
    case GgmlType::kQ8_0: RowQ8_0(x, dst, nb); break;
    case GgmlType::kQ2_K: RowQ2_K(x, dst, nb); break;
    case GgmlType::kQ3_K: RowQ3_K(x, dst, nb); break;
    case GgmlType::kQ4_K: RowQ4_5K<false>(x, dst, nb); break;
    case GgmlType::kQ5_K: RowQ4_5K<true>(x, dst, nb); break;
    case GgmlType::kQ6_K: RowQ6_K(x, dst, nb); break;
    case GgmlType::kIQ4_NL: RowIq4Nl(x, dst, nb); break;
    default: break;  // unreachable: CanDequantize checked above
  }
}

}  // namespace posenc
