// Bf16Weights (oneDNN's bf16 matmul): the product of the bfloat16-rounded operands within float32 summation's
// bound, the bound against the unrounded operands, accumulation, strides, column blocks and thread counts. The
// oneDNN kernels themselves are oneDNN's (tested by its authors per ISA); these tests run on whichever kernel
// this CPU gets and skip on CPUs without oneDNN's bf16 matmul (below AVX-512).
#include "posenc/blas/bf16_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr double kU32 = 1.0 / 16777216.0;  // float32 unit roundoff 2^-24
constexpr double kU16 = 1.0 / 256.0;       // bfloat16 unit roundoff 2^-8

double Gamma(int64_t m) { return m * kU32 / (1.0 - m * kU32); }
double RoundBf16(float v) { return BF16ToF32(F32ToBF16(v)); }

struct Case {
  int64_t rows, cols, n, ldx, ldy;
};

class Bf16MatmulTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Bf16MatmulAvailable()) GTEST_SKIP() << "oneDNN has no bf16 matmul on this CPU (" << OneDnnDescription() << ")";
    std::printf("bf16 matmul here: %s (%s)\n", Bf16MatmulImplementation().c_str(), OneDnnDescription().c_str());
  }
};

std::vector<float> Random(int64_t count, uint32_t seed, float scale) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(static_cast<size_t>(count));
  for (float& x : v) x = u(g);
  return v;
}

// Checks y (computed with beta, from y0) against float64 sums of the rounded and of the unrounded operands.
void CheckProduct(const Case& c, const std::vector<float>& w, const std::vector<float>& x,
                  const std::vector<float>& y0, const std::vector<float>& y, float beta) {
  for (int64_t t = 0; t < c.n; ++t) {
    for (int64_t r = 0; r < c.rows; ++r) {
      double rounded = 0.0, exact = 0.0, abs_sum = 0.0, abs_rounded = 0.0;
      for (int64_t k = 0; k < c.cols; ++k) {
        const float xv = x[static_cast<size_t>(t * c.ldx + k)], wv = w[static_cast<size_t>(r * c.cols + k)];
        rounded += RoundBf16(xv) * RoundBf16(wv);
        exact += static_cast<double>(xv) * wv;
        abs_sum += std::fabs(static_cast<double>(xv) * wv);
        abs_rounded += std::fabs(RoundBf16(xv) * RoundBf16(wv));
      }
      const double prev = beta == 0.0f ? 0.0 : beta * static_cast<double>(y0[static_cast<size_t>(t * c.ldy + r)]);
      const double got = y[static_cast<size_t>(t * c.ldy + r)];
      // Products of bf16 values are exact in float32; the sum of cols of them is within gamma_cols * sum |.|;
      // adding beta * y0 is one more float32 rounding (u |result|) plus beta * y0's own.
      const double add = beta == 0.0f ? 0.0 : kU32 * (std::fabs(rounded + prev) + std::fabs(prev));
      ASSERT_LE(std::fabs(got - (rounded + prev)), Gamma(c.cols) * abs_rounded + add + 1e-30)
          << "t " << t << " r " << r;
      // Against the unrounded operands: each rounding is within u = 2^-8 relative.
      const double bound = ((1 + kU16) * (1 + kU16) * (1 + Gamma(c.cols)) - 1) * abs_sum;
      ASSERT_LE(std::fabs(got - (exact + prev)), bound + add + 1e-30) << "t " << t << " r " << r;
    }
  }
}

TEST_F(Bf16MatmulTest, ProductWithinTheRoundingBound) {
  // Shapes with a partial last column block (1100 = 2 x 512 + 76), odd sizes, one row, strides.
  for (const Case& c : {Case{1100, 70, 5, 75, 1103}, Case{7, 33, 1, 33, 7}, Case{512, 64, 17, 64, 512},
                        Case{600, 1, 3, 4, 601}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols << " n " << c.n);
    const std::vector<float> w = Random(c.rows * c.cols, 1, 0.5f);
    const std::vector<float> x = Random(c.n * c.ldx, 2, 2.0f);
    const Bf16Weights packed(c.rows, c.cols, [&](int64_t r, float* dst) {
      std::memcpy(dst, w.data() + r * c.cols, static_cast<size_t>(c.cols) * 4);
    });
    EXPECT_EQ(packed.rows(), c.rows);
    EXPECT_EQ(packed.cols(), c.cols);
    EXPECT_GE(packed.bytes(), c.rows * c.cols * 2);
    for (float beta : {0.0f, 1.0f, 0.5f}) {
      const std::vector<float> y0 = Random(c.n * c.ldy, 3, 1.0f);
      std::vector<float> y = y0;
      packed.Multiply(c.n, x.data(), c.ldx, y.data(), c.ldy, beta, 1);
      CheckProduct(c, w, x, y0, y, beta);
      // Entries of y between rows (the stride's gap) are untouched.
      for (int64_t t = 0; t < c.n; ++t) {
        for (int64_t r = c.rows; r < c.ldy; ++r) {
          EXPECT_EQ(y[static_cast<size_t>(t * c.ldy + r)], y0[static_cast<size_t>(t * c.ldy + r)]);
        }
      }
    }
  }
}

TEST_F(Bf16MatmulTest, BfloatWeightsAreUsedExactly) {
  // Weights that are bfloat16 values already (a BF16 file) are not rounded again: the only error is the
  // activations' rounding and the float32 sum.
  const Case c{520, 40, 3, 40, 520};
  std::vector<float> w = Random(c.rows * c.cols, 4, 1.0f);
  for (float& v : w) v = static_cast<float>(RoundBf16(v));
  const std::vector<float> x = Random(c.n * c.ldx, 5, 1.0f);
  const Bf16Weights packed(c.rows, c.cols, [&](int64_t r, float* dst) {
    std::memcpy(dst, w.data() + r * c.cols, static_cast<size_t>(c.cols) * 4);
  });
  std::vector<float> y(static_cast<size_t>(c.n * c.ldy));
  packed.Multiply(c.n, x.data(), c.ldx, y.data(), c.ldy);
  CheckProduct(c, w, x, y, y, 0.0f);
}

// A BF16 tensor's bytes used in place (any alignment: a safetensors offset need not be even) give the products
// of packing the same values given as float32, bit for bit, and hold the bound; nothing is copied.
TEST_F(Bf16MatmulTest, BfloatBytesInPlaceMultiplyAsTheirFloatValues) {
  for (const Case& c : {Case{1100, 70, 5, 75, 1103}, Case{520, 41, 3, 41, 520}}) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.cols);
    std::vector<float> w = Random(c.rows * c.cols, 8, 1.0f);
    std::vector<uint8_t> bytes(static_cast<size_t>(c.rows * c.cols) * 2 + 1);
    for (size_t i = 0; i < w.size(); ++i) {
      const uint16_t b = F32ToBF16(w[i]);
      w[i] = BF16ToF32(b);
      std::memcpy(bytes.data() + 1 + 2 * i, &b, 2);  // an odd address
    }
    const std::vector<float> x = Random(c.n * c.ldx, 9, 1.0f);
    const Bf16Weights from_floats(c.rows, c.cols, [&](int64_t r, float* dst) {
      std::memcpy(dst, w.data() + r * c.cols, static_cast<size_t>(c.cols) * 4);
    });
    const Bf16Weights from_bytes(c.rows, c.cols, bytes.data() + 1);
    EXPECT_EQ(from_bytes.bytes(), 0);
    EXPECT_GE(from_floats.bytes(), c.rows * c.cols * 2);
    std::vector<float> a(static_cast<size_t>(c.n * c.ldy), 7.0f), b = a;
    from_floats.Multiply(c.n, x.data(), c.ldx, a.data(), c.ldy, 0.0f, 1);
    from_bytes.Multiply(c.n, x.data(), c.ldx, b.data(), c.ldy, 0.0f, 2);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
    CheckProduct(c, w, x, b, b, 0.0f);
  }
  EXPECT_THROW(Bf16Weights(2, 2, static_cast<const void*>(nullptr)), ShapeError);
}

TEST_F(Bf16MatmulTest, SameBitsForEveryThreadCount) {
  const Case c{2000, 96, 9, 96, 2000};
  const std::vector<float> w = Random(c.rows * c.cols, 6, 1.0f);
  const std::vector<float> x = Random(c.n * c.ldx, 7, 1.0f);
  const Bf16Weights packed(c.rows, c.cols, [&](int64_t r, float* dst) {
    std::memcpy(dst, w.data() + r * c.cols, static_cast<size_t>(c.cols) * 4);
  });
  std::vector<float> one(static_cast<size_t>(c.n * c.ldy)), two(one.size()), all(one.size());
  packed.Multiply(c.n, x.data(), c.ldx, one.data(), c.ldy, 0.0f, 1);
  packed.Multiply(c.n, x.data(), c.ldx, two.data(), c.ldy, 0.0f, 2);
  packed.Multiply(c.n, x.data(), c.ldx, all.data(), c.ldy, 0.0f, 0);
  EXPECT_EQ(std::memcmp(one.data(), two.data(), one.size() * 4), 0);
  EXPECT_EQ(std::memcmp(one.data(), all.data(), one.size() * 4), 0);
}

TEST_F(Bf16MatmulTest, EmptyAndBadShapes) {
  const Bf16Weights none(3, 0, [](int64_t, float*) {});
  std::vector<float> y = {1, 2, 3, 4, 5, 6};
  const float x[1] = {0};
  none.Multiply(2, x, 0, y.data(), 3, 0.5f);
  EXPECT_EQ(y, (std::vector<float>{0.5f, 1, 1.5f, 2, 2.5f, 3}));
  const Bf16Weights w(4, 2, [](int64_t, float* dst) { dst[0] = dst[1] = 1.0f; });
  EXPECT_THROW(w.Multiply(-1, x, 2, y.data(), 4), ShapeError);
  EXPECT_THROW(w.Multiply(1, x, 1, y.data(), 4), ShapeError);
  EXPECT_THROW(w.Multiply(1, x, 2, y.data(), 3), ShapeError);
  EXPECT_THROW(Bf16Weights(-1, 2, [](int64_t, float*) {}), ShapeError);
}

TEST(Bf16Matmul, DescribesItsKernel) {
  const std::string impl = Bf16MatmulImplementation();
  EXPECT_FALSE(impl.empty());
  EXPECT_EQ(Bf16MatmulAvailable(), impl != "none");
  if (Bf16MatmulHasUnits()) {
    EXPECT_TRUE(Bf16MatmulAvailable());
  }
  EXPECT_NE(OneDnnDescription().find("oneDNN"), std::string::npos);
  if (!Bf16MatmulAvailable()) {
    EXPECT_THROW(Bf16Weights(1, 1, [](int64_t, float* d) { d[0] = 0; }), ConfigError);
  }
}

}  // namespace
}  // namespace posenc
