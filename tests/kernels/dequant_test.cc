// Dequantization, block by block, against values written down from ggml's definitions (ggml-common.h block
// structs, ggml-quants.c dequantize_row_*): hand-built blocks with known fp16 scales (positive, negative, zero),
// the extreme codes, and every sub-block of the K-quants' packed 6-bit scales. Scales are powers of two or small
// integers, so every expected value is exact in float32.

#include "posenc/kernels/dequant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;

// IEEE binary16 bit patterns of the scales used below.
constexpr uint16_t kH0 = 0x0000, kH1 = 0x3C00, kH2 = 0x4000, kHHalf = 0x3800, kHQuarter = 0x3400, kHm1 = 0xBC00,
                   kHm2 = 0xC000, kHmHalf = 0xB800, kHm4 = 0xC400, kHm32 = 0xD000;

void PutHalf(std::vector<uint8_t>& b, size_t at, uint16_t h) { std::memcpy(b.data() + at, &h, 2); }

std::vector<float> Dequant(GgmlType type, const std::vector<uint8_t>& bytes, int64_t n) {
  EXPECT_EQ(GgmlRowBytes(type, n), static_cast<int64_t>(bytes.size()));
  std::vector<float> y(static_cast<size_t>(n), std::numeric_limits<float>::quiet_NaN());
  DequantizeRow(type, bytes.data(), y.data(), n);
  return y;
}

TEST(GgmlTypes, LayoutsAsGgmlDefinesThem) {
  struct Row {
    GgmlType type;
    const char* name;
    int64_t block, bytes;
  };
  for (const Row& r : {Row{GgmlType::kF32, "f32", 1, 4}, Row{GgmlType::kF16, "f16", 1, 2},
                       Row{GgmlType::kBF16, "bf16", 1, 2}, Row{GgmlType::kQ4_0, "q4_0", 32, 18},
                       Row{GgmlType::kQ4_1, "q4_1", 32, 20}, Row{GgmlType::kQ5_0, "q5_0", 32, 22},
                       Row{GgmlType::kQ5_1, "q5_1", 32, 24}, Row{GgmlType::kQ8_0, "q8_0", 32, 34},
                       Row{GgmlType::kQ2_K, "q2_K", 256, 84}, Row{GgmlType::kQ3_K, "q3_K", 256, 110},
                       Row{GgmlType::kQ4_K, "q4_K", 256, 144}, Row{GgmlType::kQ5_K, "q5_K", 256, 176},
                       Row{GgmlType::kQ6_K, "q6_K", 256, 210}, Row{GgmlType::kIQ4_NL, "iq4_nl", 32, 18}}) {
    const GgmlTypeTraits& t = GgmlTraits(r.type);
    EXPECT_EQ(t.name, r.name);
    EXPECT_EQ(t.block_size, r.block);
    EXPECT_EQ(t.type_size, r.bytes);
    EXPECT_TRUE(CanDequantize(r.type)) << r.name;
  }
  // ggml.h numbering; removed ids are unknown.
  EXPECT_EQ(FindGgmlType(30)->type, GgmlType::kBF16);
  EXPECT_EQ(FindGgmlType(20)->type, GgmlType::kIQ4_NL);
  EXPECT_EQ(FindGgmlType(14)->type, GgmlType::kQ6_K);
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 40u, 0xffffffffu}) {
    EXPECT_EQ(FindGgmlType(removed), nullptr) << removed;
  }
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_K, 512), 288);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_K, 100), -1);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF32, std::numeric_limits<int64_t>::max()), -1);
}

TEST(Dequant, Errors) {
  std::vector<uint8_t> b(64);
  std::vector<float> y(64);
  ExpectThrowWith<ShapeError>([&] { DequantizeRow(GgmlType::kQ8_0, b.data(), y.data(), 33); },
                              {"q8_0", "32", "33"});
  ExpectThrowWith<ShapeError>([&] { DequantizeRow(GgmlType::kF32, b.data(), y.data(), -1); }, {"-1"});
  ExpectThrowWith<ConfigError>([&] { DequantizeRow(GgmlType::kQ8_1, b.data(), y.data(), 32); }, {"q8_1"});
  ExpectThrowWith<ConfigError>([&] { DequantizeRow(GgmlType::kIQ2_XXS, b.data(), y.data(), 256); }, {"iq2_xxs"});
  EXPECT_FALSE(CanDequantize(GgmlType::kQ8_K));
}

TEST(Dequant, F32F16BF16) {
  const std::vector<float> f = {1.5f, -0.0f, 3.4028235e38f, 1e-45f};
  std::vector<uint8_t> b(16);
  std::memcpy(b.data(), f.data(), 16);
  EXPECT_EQ(Dequant(GgmlType::kF32, b, 4), f);

  // binary16: 1, -2, max 65504, smallest subnormal 2^-24, -0, +inf, -inf.
  const uint16_t h[] = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00, 0xFC00, 0x7E00};
  std::vector<uint8_t> hb(sizeof h);
  std::memcpy(hb.data(), h, sizeof h);
  const std::vector<float> yh = Dequant(GgmlType::kF16, hb, 8);
  EXPECT_EQ(yh[0], 1.0f);
  EXPECT_EQ(yh[1], -2.0f);
  EXPECT_EQ(yh[2], 65504.0f);
  EXPECT_EQ(yh[3], std::ldexp(1.0f, -24));
  EXPECT_TRUE(yh[4] == 0.0f && std::signbit(yh[4]));
  EXPECT_EQ(yh[5], std::numeric_limits<float>::infinity());
  EXPECT_EQ(yh[6], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(yh[7]));

  // bfloat16 = the top 16 bits of a float32: 1, -2, +inf, 2^-133 (float32 subnormal), 3.140625.
  const uint16_t bf[] = {0x3F80, 0xC000, 0x7F80, 0x0001, 0x4049};
  std::vector<uint8_t> bb(sizeof bf);
  std::memcpy(bb.data(), bf, sizeof bf);
  const std::vector<float> yb = Dequant(GgmlType::kBF16, bb, 5);
  EXPECT_EQ(yb[0], 1.0f);
  EXPECT_EQ(yb[1], -2.0f);
  EXPECT_EQ(yb[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(yb[3], std::ldexp(1.0f, -133));
  EXPECT_EQ(yb[4], 3.140625f);
}

// block_q8_0 { half d; int8 qs[32]; }: y = qs * d.
TEST(Dequant, Q8_0) {
  std::vector<uint8_t> b(3 * 34, 0);
  PutHalf(b, 0, kHHalf);  // block 0: d = 0.5, qs[j] = j - 16, extremes -128 and 127
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(j - 16));
  b[2] = static_cast<uint8_t>(-128);
  b[2 + 31] = 127;
  PutHalf(b, 34, kHm2);  // block 1: d = -2, qs = 127
  for (int j = 0; j < 32; ++j) b[36 + j] = 127;
  PutHalf(b, 68, kH0);  // block 2: d = 0, qs = -128
  for (int j = 0; j < 32; ++j) b[70 + j] = 0x80;
  const std::vector<float> y = Dequant(GgmlType::kQ8_0, b, 96);
  EXPECT_EQ(y[0], -64.0f);
  EXPECT_EQ(y[1], -7.5f);
  EXPECT_EQ(y[16], 0.0f);
  EXPECT_EQ(y[30], 7.0f);
  EXPECT_EQ(y[31], 63.5f);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(y[j], -254.0f) << j;
  for (int j = 64; j < 96; ++j) EXPECT_EQ(y[j], 0.0f) << j;
}

// block_q4_0 { half d; uint8 qs[16]; }: y[j] = (lo(qs[j]) - 8) d, y[j + 16] = (hi(qs[j]) - 8) d.
TEST(Dequant, Q4_0) {
  std::vector<uint8_t> b(2 * 18, 0);
  PutHalf(b, 0, kH1);  // lo = j, hi = 15 - j
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  PutHalf(b, 18, kHmHalf);  // d = -0.5, lo = 15, hi = 0
  for (int j = 0; j < 16; ++j) b[20 + j] = 0x0F;
  const std::vector<float> y = Dequant(GgmlType::kQ4_0, b, 64);
  const float first_half[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
  const float second_half[16] = {7, 6, 5, 4, 3, 2, 1, 0, -1, -2, -3, -4, -5, -6, -7, -8};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], first_half[j]) << j;
    EXPECT_EQ(y[16 + j], second_half[j]) << j;
    EXPECT_EQ(y[32 + j], -3.5f) << j;  // (15 - 8) * -0.5
    EXPECT_EQ(y[48 + j], 4.0f) << j;   // (0 - 8) * -0.5
  }
}

// block_q4_1 { half d; half m; uint8 qs[16]; }: y = q d + m.
TEST(Dequant, Q4_1) {
  std::vector<uint8_t> b(2 * 20, 0);
  PutHalf(b, 0, kHHalf);  // d = 0.5, m = -4, lo = j, hi = 15 - j
  PutHalf(b, 2, kHm4);
  for (int j = 0; j < 16; ++j) b[4 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  PutHalf(b, 20, kHm1);  // d = -1, m = 2, lo = 0, hi = 15
  PutHalf(b, 22, kH2);
  for (int j = 0; j < 16; ++j) b[24 + j] = 0xF0;
  const std::vector<float> y = Dequant(GgmlType::kQ4_1, b, 64);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[1], -3.5f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * static_cast<float>(j) - 4.0f);
    EXPECT_EQ(y[32 + j], 2.0f) << j;
    EXPECT_EQ(y[48 + j], -13.0f) << j;
  }
}

// block_q5_0 { half d; uint8 qh[4]; uint8 qs[16]; }: the 5th bit of value j is bit j of qh (as a little-endian
// u32), of value j + 16 bit j + 16; y = (q - 16) d.
TEST(Dequant, Q5_0) {
  std::vector<uint8_t> b(3 * 22, 0);
  auto put_qh = [&](size_t at, uint32_t qh) { std::memcpy(b.data() + at, &qh, 4); };
  PutHalf(b, 0, kH1);  // qh = 0x0000FFFF: first half +16, lo = j, hi = 15 - j
  put_qh(2, 0x0000FFFFu);
  for (int j = 0; j < 16; ++j) b[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  PutHalf(b, 22, kHQuarter);  // d = 0.25, qh = 0xFFFF0000, same nibbles
  put_qh(24, 0xFFFF0000u);
  for (int j = 0; j < 16; ++j) b[28 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  PutHalf(b, 44, kH1);  // d = 1, qs = 0, only bits 5 and 20 set: values 5 and 20 are code 16, others code 0
  put_qh(46, (1u << 5) | (1u << 20));
  const std::vector<float> y = Dequant(GgmlType::kQ5_0, b, 96);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], static_cast<float>(j)) << j;                      // (j | 16) - 16
    EXPECT_EQ(y[16 + j], static_cast<float>(-1 - j)) << j;            // (15 - j) - 16
    EXPECT_EQ(y[32 + j], 0.25f * static_cast<float>(j - 16)) << j;    // j - 16
    EXPECT_EQ(y[48 + j], 0.25f * static_cast<float>(15 - j)) << j;    // ((15 - j) | 16) - 16
  }
  EXPECT_EQ(y[15], 15.0f);   // code 31, the largest
  EXPECT_EQ(y[31], -16.0f);  // code 0, the smallest
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[64 + j], (j == 5 || j == 20) ? 0.0f : -16.0f) << j;
}

// block_q5_1 { half d; half m; uint8 qh[4]; uint8 qs[16]; }: y = q d + m.
TEST(Dequant, Q5_1) {
  std::vector<uint8_t> b(3 * 24, 0);
  auto put_qh = [&](size_t at, uint32_t qh) { std::memcpy(b.data() + at, &qh, 4); };
  PutHalf(b, 0, kHHalf);  // d = 0.5, m = 1, every code 31
  PutHalf(b, 2, kH1);
  put_qh(4, 0xFFFFFFFFu);
  for (int j = 0; j < 16; ++j) b[8 + j] = 0xFF;
  PutHalf(b, 24, kH2);  // d = 2, m = -32, every code 0
  PutHalf(b, 26, kHm32);
  PutHalf(b, 48, kH1);  // d = 1, m = 0, qh bits 0 and 31, lo = hi = j
  put_qh(52, 0x80000001u);
  for (int j = 0; j < 16; ++j) b[56 + j] = static_cast<uint8_t>(j | (j << 4));
  const std::vector<float> y = Dequant(GgmlType::kQ5_1, b, 96);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(y[j], 16.5f) << j;
    EXPECT_EQ(y[32 + j], -32.0f) << j;
  }
  EXPECT_EQ(y[64], 16.0f);
  for (int j = 1; j < 16; ++j) EXPECT_EQ(y[64 + j], static_cast<float>(j)) << j;
  for (int j = 0; j < 15; ++j) EXPECT_EQ(y[80 + j], static_cast<float>(j)) << j;
  EXPECT_EQ(y[95], 31.0f);
}

// block_iq4_nl { half d; uint8 qs[16]; }: y[j] = d kvalues[lo(qs[j])], y[j + 16] = d kvalues[hi(qs[j])], with
// ggml-common.h's kvalues_iq4nl = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}.
TEST(Dequant, Iq4Nl) {
  const float kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  std::vector<uint8_t> b(2 * 18, 0);
  PutHalf(b, 0, kH1);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  PutHalf(b, 18, kHmHalf);
  for (int j = 0; j < 16; ++j) b[20 + j] = 0x0F;
  const std::vector<float> y = Dequant(GgmlType::kIQ4_NL, b, 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kv[j]) << j;
    EXPECT_EQ(y[16 + j], kv[15 - j]) << j;
    EXPECT_EQ(y[32 + j], -56.5f) << j;  // -0.5 * 113
    EXPECT_EQ(y[48 + j], 63.5f) << j;   // -0.5 * -127
  }
}

// The value index of the Q2_K / Q3_K layout: value 128h + 32k + 16b + l (half h, 2-bit field k, b in {0, 1},
// l < 16) is bits 2k..2k+1 of qs[32h + 16b + l] and belongs to sub-block s = 8h + 2k + b.
struct Q23Index {
  int h, k, b, l;
  int value() const { return 128 * h + 32 * k + 16 * b + l; }
  int sub_block() const { return 8 * h + 2 * k + b; }
  int qs_byte() const { return 32 * h + 16 * b + l; }
};

template <typename F>
void ForEachQ23(F f) {
  for (int h = 0; h < 2; ++h)
    for (int k = 0; k < 4; ++k)
      for (int b = 0; b < 2; ++b)
        for (int l = 0; l < 16; ++l) f(Q23Index{h, k, b, l});
}

// block_q2_K { uint8 scales[16]; uint8 qs[64]; half d; half dmin; }: sub-block s has scale d (scales[s] & 15)
// and min dmin (scales[s] >> 4); y = scale q - min.
TEST(Dequant, Q2_K) {
  std::vector<uint8_t> b(3 * 84, 0);
  // Block 0: d = 1, dmin = 0.5; scale_s = s, min_s = 15 - s; every qs byte 0b11100100, so field k holds code k.
  for (int s = 0; s < 16; ++s) b[s] = static_cast<uint8_t>(s | ((15 - s) << 4));
  for (int i = 0; i < 64; ++i) b[16 + i] = 0xE4;
  PutHalf(b, 80, kH1);
  PutHalf(b, 82, kHHalf);
  // Block 1: d = -2, dmin = 0, every scale 15: y = -30 q; qs byte i holds code i & 3 in field 0 only.
  for (int s = 0; s < 16; ++s) b[84 + s] = 0x0F;
  for (int i = 0; i < 64; ++i) b[84 + 16 + i] = static_cast<uint8_t>(i & 3);
  PutHalf(b, 84 + 80, kHm2);
  PutHalf(b, 84 + 82, kH0);
  // Block 2: d = 0, dmin = 1, mins 15: y = -15 whatever the codes.
  for (int s = 0; s < 16; ++s) b[168 + s] = 0xF7;
  for (int i = 0; i < 64; ++i) b[168 + 16 + i] = 0xFF;
  PutHalf(b, 168 + 80, kH0);
  PutHalf(b, 168 + 82, kH1);
  const std::vector<float> y = Dequant(GgmlType::kQ2_K, b, 768);
  EXPECT_EQ(y[0], -7.5f);     // s 0, code 0: 0 - 0.5 * 15
  EXPECT_EQ(y[16], -7.0f);    // s 1, code 0
  EXPECT_EQ(y[32], -4.5f);    // s 2, code 1: 2 - 0.5 * 13
  EXPECT_EQ(y[208], 25.0f);   // h 1, k 2, b 1: s 13, code 2: 26 - 0.5 * 2
  EXPECT_EQ(y[255], 45.0f);   // s 15, code 3 (the largest): 45 - 0
  ForEachQ23([&](Q23Index i) {
    const int s = i.sub_block();
    EXPECT_EQ(y[i.value()], static_cast<float>(s * i.k) - 0.5f * static_cast<float>(15 - s)) << i.value();
    EXPECT_EQ(y[256 + i.value()], i.k == 0 ? -30.0f * static_cast<float>(i.qs_byte() & 3) : 0.0f) << i.value();
    EXPECT_EQ(y[512 + i.value()], -15.0f) << i.value();
  });
}

// Packs 16 6-bit Q3_K scales (0..63, stored offset by 32) into 12 bytes, per ggml's layout: low 4 bits of scale s
// in byte s (s < 8, low nibble) or byte s - 8 (high nibble); high 2 bits in byte 8 + s % 4 at bit 2 (s / 4).
void PackQ3KScales(const int (&sc)[16], uint8_t* out) {
  std::memset(out, 0, 12);
  for (int s = 0; s < 16; ++s) {
    if (s < 8) out[s] |= static_cast<uint8_t>(sc[s] & 0xF);
    else out[s - 8] |= static_cast<uint8_t>((sc[s] & 0xF) << 4);
    out[8 + s % 4] |= static_cast<uint8_t>((sc[s] >> 4) << (2 * (s / 4)));
  }
}

// block_q3_K { uint8 hmask[32]; uint8 qs[64]; uint8 scales[12]; half d; }: sub-block s scale d (sc_s - 32);
// code = 2-bit field - (hmask bit (4h + k) of hmask[16b + l] ? 0 : 4); y = scale code.
TEST(Dequant, Q3_K) {
  std::vector<uint8_t> b(3 * 110, 0);
  int sc[16];
  for (int s = 0; s < 16; ++s) sc[s] = 4 * s + 3;  // 3, 7, ..., 63: signed -29, -25, ..., 31
  // Block 0: d = 1, field k = code k, every hmask bit set (no -4).
  for (int i = 0; i < 32; ++i) b[i] = 0xFF;
  for (int i = 0; i < 64; ++i) b[32 + i] = 0xE4;
  PackQ3KScales(sc, &b[96]);
  PutHalf(b, 108, kH1);
  // Block 1: d = -1, same scales and fields, hmask clear: code k - 4.
  for (int i = 0; i < 64; ++i) b[110 + 32 + i] = 0xE4;
  PackQ3KScales(sc, &b[110 + 96]);
  PutHalf(b, 110 + 108, kHm1);
  // Block 2: d = 1, every scale 33 (signed 1), fields 0, hmask[i] = 1 << (i % 8): code 0 where the bit for
  // (h, k) is set, else -4.
  for (int i = 0; i < 32; ++i) b[220 + i] = static_cast<uint8_t>(1u << (i % 8));
  int ones[16];
  for (int& s : ones) s = 33;
  PackQ3KScales(ones, &b[220 + 96]);
  PutHalf(b, 220 + 108, kH1);
  const std::vector<float> y = Dequant(GgmlType::kQ3_K, b, 768);
  EXPECT_EQ(y[0], 0.0f);       // s 0 (-29), code 0
  EXPECT_EQ(y[32], -21.0f);    // s 2 (-21), code 1
  EXPECT_EQ(y[255], 93.0f);    // s 15 (31), code 3
  EXPECT_EQ(y[256], -116.0f);  // block 1: -1 * -29 * (0 - 4)
  EXPECT_EQ(y[511], 31.0f);    // block 1: -1 * 31 * (3 - 4)
  ForEachQ23([&](Q23Index i) {
    const float scale = static_cast<float>(sc[i.sub_block()] - 32);
    EXPECT_EQ(y[i.value()], scale * static_cast<float>(i.k)) << i.value();
    EXPECT_EQ(y[256 + i.value()], -scale * static_cast<float>(i.k - 4)) << i.value();
    const bool bit = (i.qs_byte() - 32 * i.h) % 8 == 4 * i.h + i.k;  // hmask index 16b + l
    EXPECT_EQ(y[512 + i.value()], bit ? 0.0f : -4.0f) << i.value();
  });
}

// Packs 8 6-bit scales and mins of a Q4_K / Q5_K block into 12 bytes (ggml `get_scale_min_k4` read order):
// j < 4: scales[j] = sc_j | (sc_{j+4} >> 4) << 6, scales[j + 4] = m_j | (m_{j+4} >> 4) << 6;
// j >= 4: scales[j + 4] = (sc_j & 15) | (m_j & 15) << 4.
void PackK4Scales(const int (&sc)[8], const int (&m)[8], uint8_t* out) {
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(m[j] | ((m[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((m[j + 4] & 0xF) << 4));
  }
}

constexpr int kK4Scales[8] = {1, 2, 3, 63, 16, 33, 47, 60};  // every sub-block distinct, high bits exercised
constexpr int kK4Mins[8] = {0, 5, 62, 9, 48, 17, 31, 63};

// block_q4_K { half d; half dmin; uint8 scales[12]; uint8 qs[128]; }: value 64p + l (l < 32) is
// (d sc_{2p}) lo(qs[32p + l]) - dmin m_{2p}; value 64p + 32 + l uses hi(qs[32p + l]) and sub-block 2p + 1.
TEST(Dequant, Q4_K) {
  std::vector<uint8_t> b(3 * 144, 0);
  PutHalf(b, 0, kHHalf);  // block 0: d = 0.5, dmin = 0.25, lo = l % 16, hi = 15 - l % 16
  PutHalf(b, 2, kHQuarter);
  PackK4Scales(kK4Scales, kK4Mins, &b[4]);
  for (int i = 0; i < 128; ++i) b[16 + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  PutHalf(b, 144, kHm1);  // block 1: d = -1, dmin = -2, every scale/min 63, every code 15
  PutHalf(b, 146, kHm2);
  for (int i = 0; i < 140; ++i) b[148 + i] = 0xFF;
  PutHalf(b, 288, kH0);  // block 2: d = dmin = 0
  PutHalf(b, 290, kH0);
  for (int i = 0; i < 140; ++i) b[292 + i] = 0xFF;
  const std::vector<float> y = Dequant(GgmlType::kQ4_K, b, 768);
  EXPECT_EQ(y[0], 0.0f);           // sub-block 0: 0.5 * 1 * 0 - 0.25 * 0
  EXPECT_EQ(y[32 + 0], 15.0f - 1.25f);  // sub-block 1: 0.5 * 2 * 15 - 0.25 * 5
  EXPECT_EQ(y[64 * 3 + 32 + 15], 0.5f * 60 * 0 - 0.25f * 63);  // sub-block 7, code 0
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      const int lo = l % 16, hi = 15 - l % 16;
      EXPECT_EQ(y[64 * p + l], 0.5f * static_cast<float>(kK4Scales[2 * p]) * static_cast<float>(lo) -
                                   0.25f * static_cast<float>(kK4Mins[2 * p]))
          << p << " " << l;
      EXPECT_EQ(y[64 * p + 32 + l], 0.5f * static_cast<float>(kK4Scales[2 * p + 1]) * static_cast<float>(hi) -
                                        0.25f * static_cast<float>(kK4Mins[2 * p + 1]))
          << p << " " << l;
    }
  }
  for (int i = 256; i < 512; ++i) EXPECT_EQ(y[i], -819.0f) << i;  // -1 * 63 * 15 - (-2 * 63)
  for (int i = 512; i < 768; ++i) EXPECT_EQ(y[i], 0.0f) << i;
}

// block_q5_K { half d; half dmin; uint8 scales[12]; uint8 qh[32]; uint8 qs[128]; }: as Q4_K, plus 16 when bit
// 2p of qh[l] is set (value 64p + l) or bit 2p + 1 (value 64p + 32 + l).
TEST(Dequant, Q5_K) {
  std::vector<uint8_t> b(3 * 176, 0);
  // Block 0: d = 1, dmin = 0, every scale 1, low codes 0, qh[l] = 1 << (l % 8).
  PutHalf(b, 0, kH1);
  const int ones[8] = {1, 1, 1, 1, 1, 1, 1, 1}, zeros[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  PackK4Scales(ones, zeros, &b[4]);
  for (int l = 0; l < 32; ++l) b[16 + l] = static_cast<uint8_t>(1u << (l % 8));
  // Block 1: d = 0.5, dmin = 0.25, the distinct scales, every code 31 (the largest).
  PutHalf(b, 176, kHHalf);
  PutHalf(b, 178, kHQuarter);
  PackK4Scales(kK4Scales, kK4Mins, &b[176 + 4]);
  for (int i = 0; i < 160; ++i) b[176 + 16 + i] = 0xFF;
  // Block 2: d = -2, dmin = 1, scale 1 / min 63 everywhere, code 0.
  PutHalf(b, 352, kHm2);
  PutHalf(b, 354, kH1);
  const int mins63[8] = {63, 63, 63, 63, 63, 63, 63, 63};
  PackK4Scales(ones, mins63, &b[352 + 4]);
  const std::vector<float> y = Dequant(GgmlType::kQ5_K, b, 768);
  for (int p = 0; p < 4; ++p) {
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[64 * p + l], l % 8 == 2 * p ? 16.0f : 0.0f) << p << " " << l;
      EXPECT_EQ(y[64 * p + 32 + l], l % 8 == 2 * p + 1 ? 16.0f : 0.0f) << p << " " << l;
      EXPECT_EQ(y[256 + 64 * p + l], 0.5f * static_cast<float>(kK4Scales[2 * p]) * 31.0f -
                                         0.25f * static_cast<float>(kK4Mins[2 * p]));
      EXPECT_EQ(y[256 + 64 * p + 32 + l], 0.5f * static_cast<float>(kK4Scales[2 * p + 1]) * 31.0f -
                                              0.25f * static_cast<float>(kK4Mins[2 * p + 1]));
    }
  }
  EXPECT_EQ(y[256 + 64 * 3 + 32], 930.0f - 15.75f);  // 0.5 * 60 * 31 - 0.25 * 63
  for (int i = 512; i < 768; ++i) EXPECT_EQ(y[i], -63.0f) << i;
}

// block_q6_K { uint8 ql[128]; uint8 qh[64]; int8 scales[16]; half d; }: in half h, value 128h + 32c + l has
// low 4 bits from ql[64h + 32(c & 1) + l] (low nibble for c < 2, high for c >= 2), high 2 bits from bits 2c of
// qh[32h + l], code = that 6-bit number - 32, scale scales[8h + 2c + l / 16]; y = (d scale) code.
TEST(Dequant, Q6_K) {
  std::vector<uint8_t> b(3 * 210, 0);
  const int8_t scales[16] = {-128, 127, 0, 1, -1, 2, -2, 3, 4, -4, 5, -5, 6, -6, 7, -7};
  // Block 0: d = 0.5, every code 63 - 32 = 31.
  for (int i = 0; i < 192; ++i) b[i] = 0xFF;
  std::memcpy(&b[192], scales, 16);
  PutHalf(b, 208, kHHalf);
  // Block 1: d = -1, every code 0 - 32 = -32.
  std::memcpy(&b[210 + 192], scales, 16);
  PutHalf(b, 210 + 208, kHm1);
  // Block 2: d = 1, every scale 1; ql[i] = i % 16 | (15 - i % 16) << 4, qh[i] = i (bits 2c..2c+1 of i).
  for (int i = 0; i < 128; ++i) b[420 + i] = static_cast<uint8_t>((i % 16) | ((15 - i % 16) << 4));
  for (int i = 0; i < 64; ++i) b[420 + 128 + i] = static_cast<uint8_t>(i);
  for (int i = 0; i < 16; ++i) b[420 + 192 + i] = 1;
  PutHalf(b, 420 + 208, kH1);
  const std::vector<float> y = Dequant(GgmlType::kQ6_K, b, 768);
  EXPECT_EQ(y[0], -1984.0f);  // 0.5 * -128 * 31
  EXPECT_EQ(y[16], 1968.5f);  // 0.5 * 127 * 31
  EXPECT_EQ(y[256], -4096.0f);  // -1 * -128 * -32
  for (int h = 0; h < 2; ++h) {
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int v = 128 * h + 32 * c + l;
        const float scale = static_cast<float>(scales[8 * h + 2 * c + l / 16]);
        EXPECT_EQ(y[v], 0.5f * scale * 31.0f) << v;
        EXPECT_EQ(y[256 + v], -scale * -32.0f) << v;
        const int ql_index = 64 * h + 32 * (c & 1) + l;
        const int low = c < 2 ? ql_index % 16 : 15 - ql_index % 16;
        const int high = ((32 * h + l) >> (2 * c)) & 3;
        EXPECT_EQ(y[512 + v], static_cast<float>((low | (high << 4)) - 32)) << v;
      }
    }
  }
}

}  // namespace
}  // namespace posenc
