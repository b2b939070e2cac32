// QuantMatmul and its kernels (quant_dot.h), once per Highway target this CPU runs, for every type DequantizeRow
// decodes:
//   - DequantizeRows equals DequantizeRow bit for bit (random blocks; every binary16 bit pattern for F16);
//   - QuantMatmul (panel and direct paths) against a float64 product of the DequantizeRow weights, within the
//     float32 summation bound gamma_in * sum_k |x_k w_k| (gamma_m = m u / (1 - m u), u = 2^-24: each output is a
//     sum of `in` rounded products in some order, Higham Sec. 3.1), plus the float64 reference's own
//     gamma_in(2^-53) share; sizes n = 1, 3, 257, out = 300 (not a multiple of any panel height), in = several
//     blocks (2 K-quant super-blocks, 5 blocks of 32, 257 plain values: a vector tail on every target);
//   - threads 1 and 2 give the same bits on both paths, and kAuto the bits of the path it picks (QuantMatmul
//     starts one thread per 2^20 multiply-adds: n = 257 runs on two threads, n = 1 and 3 on one).
// Errors (unsupported type, `in` not a multiple of the block size, bad sizes) are checked once.
#include "posenc/kernels/quant_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "hwy/tests/hwy_gtest.h"
#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/gguf.h"
#include "posenc/kernels/quant_dot.h"

class QuantMatmulKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(QuantMatmulKernelTest);

namespace posenc {
namespace {

const GgmlType kTypes[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0,  GgmlType::kQ4_0,
                           GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ2_K,  GgmlType::kQ3_K,
                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_NL};

// Byte offsets of the binary16 scales (d, dmin / m) inside one block (ggml-common.h block structs).
std::vector<int> HalfOffsets(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: return {0, 2};
    case GgmlType::kQ2_K: return {80, 82};
    case GgmlType::kQ3_K: return {108};
    case GgmlType::kQ6_K: return {208};
    default: return {0};  // Q4_0, Q5_0, Q8_0, IQ4_NL
  }
}

// `in` for the tests: several blocks of the type.
int64_t TestIn(GgmlType type) {
  const int64_t block = GgmlTraits(type).block_size;
  return block == 1 ? 257 : block == 32 ? 5 * 32 : 2 * 256;
}

// `rows` random rows of `in` values in `type`: uniform random code bytes with every scale a random binary16 of
// magnitude in [2^-10, 2^-4] and either sign; plain types hold normal(0, 1) values rounded to the type.
std::vector<uint8_t> RandomRows(GgmlType type, int64_t rows, int64_t in, std::mt19937& rng) {
  const int64_t row_bytes = GgmlRowBytes(type, in);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * row_bytes));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> scale(-10.0f, -4.0f);
  std::uniform_int_distribution<int> byte(0, 255);
  const int64_t n = rows * in;
  switch (type) {
    case GgmlType::kF32:
      for (int64_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        std::memcpy(&bytes[static_cast<size_t>(4 * i)], &v, 4);
      }
      return bytes;
    case GgmlType::kF16:
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t h = type == GgmlType::kF16 ? F32ToF16(normal(rng)) : F32ToBF16(normal(rng));
        std::memcpy(&bytes[static_cast<size_t>(2 * i)], &h, 2);
      }
      return bytes;
    default: break;
  }
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(byte(rng));
  const GgmlTypeTraits& t = GgmlTraits(type);
  for (size_t block = 0; block < bytes.size(); block += static_cast<size_t>(t.type_size)) {
    for (int off : HalfOffsets(type)) {
      const float s = std::exp2(scale(rng)) * (byte(rng) < 128 ? -1.0f : 1.0f);
      const uint16_t h = F32ToF16(s);
      std::memcpy(&bytes[block + static_cast<size_t>(off)], &h, 2);
    }
  }
  return bytes;
}

std::vector<float> Dequantized(GgmlType type, const std::vector<uint8_t>& w, int64_t rows, int64_t in) {
  std::vector<float> out(static_cast<size_t>(rows * in));
  const int64_t row_bytes = GgmlRowBytes(type, in);
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(type, w.data() + r * row_bytes, out.data() + r * in, in);
  return out;
}

// float64 product of x [n, in] and the dequantized rows wf [out, in], with sum |x_k w_k| per output.
struct Reference {
  std::vector<double> y, magnitude;
};
Reference ReferenceProduct(const std::vector<float>& x, const std::vector<float>& wf, int64_t n, int64_t out,
                           int64_t in) {
  Reference r{std::vector<double>(static_cast<size_t>(n * out)), std::vector<double>(static_cast<size_t>(n * out))};
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < out; ++o) {
      double s = 0, m = 0;
      for (int64_t k = 0; k < in; ++k) {
        const double p = static_cast<double>(x[static_cast<size_t>(i * in + k)]) * wf[static_cast<size_t>(o * in + k)];
        s += p;
        m += std::fabs(p);
      }
      r.y[static_cast<size_t>(i * out + o)] = s;
      r.magnitude[static_cast<size_t>(i * out + o)] = m;
    }
  }
  return r;
}

double Gamma(int64_t m, double u) { return static_cast<double>(m) * u / (1.0 - static_cast<double>(m) * u); }

// Every output within the summation bound of the float64 reference; returns the largest error / bound.
double CheckWithinBound(const std::vector<float>& y, const Reference& ref, int64_t in, const std::string& what) {
  const double g = Gamma(in, 0x1p-24) + Gamma(in, 0x1p-53);
  double worst = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double err = std::fabs(static_cast<double>(y[i]) - ref.y[i]);
    const double bound = g * ref.magnitude[i];
    EXPECT_LE(err, bound) << what << " output " << i << ": got " << y[i] << " want " << ref.y[i];
    if (err > bound) return err / bound;  // one message per case is enough
    if (bound > 0) worst = std::max(worst, err / bound);
  }
  return worst;
}

TEST_P(QuantMatmulKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(kernels::QuantKernelTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(QuantMatmulKernelTest, DequantizeRowsEqualsDequantizeRowBitForBit) {
  std::mt19937 rng(5);
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    const int64_t rows = 3, in = TestIn(type), row_bytes = GgmlRowBytes(type, in);
    const std::vector<uint8_t> w = RandomRows(type, rows, in, rng);
    // Misaligned copy of the weights (offset 1) and a destination stride wider than the row.
    std::vector<uint8_t> shifted(w.size() + 1);
    std::memcpy(shifted.data() + 1, w.data(), w.size());
    const int64_t ld = in + 3;
    std::vector<float> got(static_cast<size_t>(rows * ld), -1.0f), want(got.size(), -1.0f);
    kernels::DequantizeRows(type, shifted.data() + 1, row_bytes, rows, in, got.data(), ld);
    kernels::DequantizeRowsScalar(type, w.data(), row_bytes, rows, in, want.data(), ld);
    ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  }
}

TEST_P(QuantMatmulKernelTest, F16EveryBitPatternAsF16ToF32) {
  std::vector<uint16_t> halves(65536);
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> got(halves.size());
  kernels::DequantizeRows(GgmlType::kF16, halves.data(), 2 * 65536, 1, 65536, got.data(), 65536);
  for (size_t i = 0; i < halves.size(); ++i) {
    const float want = F16ToF32(halves[i]);
    ASSERT_EQ(std::memcmp(&got[i], &want, 4), 0) << "half bits 0x" << std::hex << i;
  }
}

TEST_P(QuantMatmulKernelTest, ProductWithinFloat32SummationBound) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t out = 300;
  for (GgmlType type : kTypes) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    const int64_t in = TestIn(type);
    const std::vector<uint8_t> w = RandomRows(type, out, in, rng);
    const std::vector<float> wf = Dequantized(type, w, out, in);
    for (int64_t n : {1, 3, 257}) {
      std::vector<float> x(static_cast<size_t>(n * in));
      for (float& v : x) v = normal(rng);
      const Reference ref = ReferenceProduct(x, wf, n, out, in);
      for (QuantMatmulPath path : {QuantMatmulPath::kPanel, QuantMatmulPath::kDirect}) {
        const std::string what = std::string(QuantMatmulPathName(path)) + " n=" + std::to_string(n);
        std::vector<float> y1(static_cast<size_t>(n * out), NAN), y2(y1.size(), NAN);
        QuantMatmul(type, w.data(), out, in, x.data(), n, y1.data(), {1, path});
        CheckWithinBound(y1, ref, in, what);
        QuantMatmul(type, w.data(), out, in, x.data(), n, y2.data(), {2, path});
        EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0) << what << ": threads 1 vs 2";
        if (path == ChooseQuantMatmulPath(type, n)) {
          std::vector<float> ya(y1.size(), NAN);
          QuantMatmul(type, w.data(), out, in, x.data(), n, ya.data(), {2, QuantMatmulPath::kAuto});
          EXPECT_EQ(std::memcmp(y1.data(), ya.data(), y1.size() * sizeof(float)), 0) << what << ": auto";
        }
      }
    }
  }
}

// Panels of 7 rows (many sgemm calls, a short last panel) give a product within the bound, the same bits for
// threads 1 and 2.
TEST(QuantMatmul, ChosenPanelHeight) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const GgmlType type = GgmlType::kQ4_K;
  const int64_t out = 45, in = 512, n = 6;
  const std::vector<uint8_t> w = RandomRows(type, out, in, rng);
  std::vector<float> x(static_cast<size_t>(n * in));
  for (float& v : x) v = normal(rng);
  const Reference ref = ReferenceProduct(x, Dequantized(type, w, out, in), n, out, in);
  std::vector<float> y1(static_cast<size_t>(n * out)), y2(y1.size());
  QuantMatmul(type, w.data(), out, in, x.data(), n, y1.data(), {1, QuantMatmulPath::kPanel, 7});
  QuantMatmul(type, w.data(), out, in, x.data(), n, y2.data(), {2, QuantMatmulPath::kPanel, 7});
  CheckWithinBound(y1, ref, in, "panel_rows 7");
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)), 0);
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(type, w.data(), out, in, x.data(), n, y1.data(), {1, QuantMatmulPath::kPanel, -3}); },
      {"panel_rows", "-3"});
}

TEST(QuantMatmul, ScratchBytes) {
  // 1 MiB panels of 1024 rows of 256 values; a 768-row matrix needs one panel of 768 rows.
  EXPECT_EQ(QuantMatmulPanelRows(256), 1024);
  EXPECT_EQ(QuantMatmulScratchBytes(GgmlType::kQ8_0, 512, 32000, 256, 2, QuantMatmulPath::kAuto), 2 * 1024 * 256 * 4);
  EXPECT_EQ(QuantMatmulScratchBytes(GgmlType::kQ8_0, 512, 768, 256, 2, QuantMatmulPath::kPanel), 768 * 256 * 4);
  EXPECT_EQ(QuantMatmulScratchBytes(GgmlType::kQ8_0, 1, 768, 256, 2, QuantMatmulPath::kAuto), 0);
  EXPECT_EQ(QuantMatmulScratchBytes(GgmlType::kF32, 512, 768, 256, 2, QuantMatmulPath::kPanel), 0);
}

// Decode takes the direct path and prefill the panel path, for every type.
TEST(QuantMatmul, AutoPathByRows) {
  for (GgmlType type : kTypes) {
    EXPECT_EQ(ChooseQuantMatmulPath(type, 1), QuantMatmulPath::kDirect) << GgmlTypeName(type);
    EXPECT_EQ(ChooseQuantMatmulPath(type, 512), QuantMatmulPath::kPanel) << GgmlTypeName(type);
  }
}

// The kernels' scalar twin sits within the same bound (it sums in index order).
TEST_P(QuantMatmulKernelTest, ScalarTwinWithinBound) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kBF16}) {
    SCOPED_TRACE(std::string(GgmlTypeName(type)));
    const int64_t out = 9, in = TestIn(type), n = 5;
    const std::vector<uint8_t> w = RandomRows(type, out, in, rng);
    std::vector<float> x(static_cast<size_t>(n * in));
    for (float& v : x) v = normal(rng);
    const Reference ref = ReferenceProduct(x, Dequantized(type, w, out, in), n, out, in);
    std::vector<float> simd(static_cast<size_t>(n * out)), scalar(simd.size());
    kernels::QuantDotRows(type, w.data(), GgmlRowBytes(type, in), out, in, x.data(), n, simd.data(), out);
    kernels::QuantDotRowsScalar(type, w.data(), GgmlRowBytes(type, in), out, in, x.data(), n, scalar.data(), out);
    CheckWithinBound(simd, ref, in, "QuantDotRows");
    CheckWithinBound(scalar, ref, in, "QuantDotRowsScalar");
  }
}

// Weights a real quantizer wrote (llama.cpp's, in the llama-mini-rand fixtures): the classifier-sized token
// embedding [32000, 256] and a feed-forward matrix [704, 256], as the model multiplies them.
TEST(QuantMatmul, LlamaMiniRandFixtureWeights) {
  int checked = 0;
  for (const char* name : {"llama-mini-rand-q8_0.gguf", "llama-mini-rand-bf16.gguf", "llama-mini-rand-Q4_K_M.gguf"}) {
    const std::string path = testing::SharedModel(name);
    POSENC_SKIP_IF_ABSENT(path);
    const GgufFile f = GgufFile::Open(path);
    for (const char* tensor : {"token_embd.weight", "blk.0.ffn_gate.weight", "blk.1.ffn_down.weight"}) {
      const GgufTensorInfo& t = f.GetTensor(tensor);
      SCOPED_TRACE(std::string(name) + " " + tensor + " " + std::string(GgmlTypeName(t.type)));
      const int64_t out = std::min<int64_t>(t.n_rows(), 1000), in = t.row_length();
      std::vector<uint8_t> w(t.data, t.data + out * GgmlRowBytes(t.type, in));
      std::mt19937 rng(3);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (int64_t n : {1, 7}) {
        std::vector<float> x(static_cast<size_t>(n * in));
        for (float& v : x) v = normal(rng);
        const Reference ref = ReferenceProduct(x, Dequantized(t.type, w, out, in), n, out, in);
        std::vector<float> y(static_cast<size_t>(n * out));
        QuantMatmul(t.type, w.data(), out, in, x.data(), n, y.data(), {2});
        CheckWithinBound(y, ref, in, "n=" + std::to_string(n));
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 18);
}

TEST(QuantMatmul, RejectsBadInput) {
  std::vector<uint8_t> w(4096);
  std::vector<float> x(256), y(256);
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, w.data(), 2, 100, x.data(), 1, y.data()); }, {"q8_0", "32", "100", "in"});
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(GgmlType::kQ4_K, w.data(), 1, 32, x.data(), 1, y.data()); }, {"q4_K", "256", "32"});
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(GgmlType::kIQ2_XXS, w.data(), 1, 256, x.data(), 1, y.data()); }, {"iq2_xxs", "supported"});
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(static_cast<GgmlType>(4), w.data(), 1, 32, x.data(), 1, y.data()); }, {"type id 4"});
  testing::ExpectThrowWith<ConfigError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, w.data(), 1, 32, x.data(), 1, y.data(), {-1}); }, {"threads", "-1"});
  testing::ExpectThrowWith<ShapeError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, w.data(), 1, 32, x.data(), -2, y.data()); }, {"n", "-2"});
  testing::ExpectThrowWith<ShapeError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, w.data(), -1, 32, x.data(), 1, y.data()); }, {"out=-1"});
  testing::ExpectThrowWith<ShapeError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, nullptr, 1, 32, x.data(), 1, y.data()); }, {"null"});
  testing::ExpectThrowWith<ShapeError>(
      [&] { QuantMatmul(GgmlType::kQ8_0, w.data(), int64_t{1} << 40, int64_t{1} << 30, x.data(), 1, y.data()); },
      {"overflows"});
  testing::ExpectThrowWith<ConfigError>(
      [&] { DequantizeMatrix(GgmlType::kQ6_K, w.data(), 1, 100, y.data()); }, {"q6_K", "256", "100"});
}

TEST(QuantMatmul, EmptyOperands) {
  std::vector<uint8_t> w(34);
  std::vector<float> y(3, NAN);
  QuantMatmul(GgmlType::kQ8_0, w.data(), 3, 0, nullptr, 1, y.data());  // in = 0: empty sums
  for (float v : y) EXPECT_EQ(v, 0.0f);
  QuantMatmul(GgmlType::kQ8_0, w.data(), 0, 32, nullptr, 1, nullptr);  // out = 0: nothing to write
  QuantMatmul(GgmlType::kQ8_0, w.data(), 1, 32, nullptr, 0, nullptr);  // n = 0
}

TEST(QuantMatmul, DequantizeMatrixEqualsDequantizeRow) {
  std::mt19937 rng(13);
  for (GgmlType type : {GgmlType::kQ6_K, GgmlType::kQ5_1, GgmlType::kF16}) {
    const int64_t out = 77, in = TestIn(type);
    const std::vector<uint8_t> w = RandomRows(type, out, in, rng);
    std::vector<float> got(static_cast<size_t>(out * in));
    DequantizeMatrix(type, w.data(), out, in, got.data(), 2);
    const std::vector<float> want = Dequantized(type, w, out, in);
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << GgmlTypeName(type);
  }
}

}  // namespace
}  // namespace posenc
