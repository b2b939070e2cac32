// Q8Weights and QuantizeQ8Rows (kernels/q8_matmul.h), on the scalar kernel everywhere and on the AVX512-VNNI kernel
// where the CPU has it (skipped elsewhere, saying so):
//   - the quantized activations against ggml's definition written out here (roundf of x / (max|x| / 127), float16
//     scale), on values chosen to break a wrong rounding: exact halves, the float just below 0.5, blocks of zeros,
//     blocks so small that the float16 scale is 0, negative zeros; the VNNI quantizer gives the same bytes;
//   - Multiply against a float64 evaluation of the stated semantics (exact integer block sums, the float32 scale
//     products, a float32 sum over blocks): within gamma_B of that sum (and bit for bit between the two kernels);
//   - Multiply against the float64 product of the unquantized activations and the dequantized weights, within the
//     documented bound (half a quantization step per value plus the float16 scale's rounding);
//   - beta, NaN rows, thread counts, sizes that are not multiples of the tiles, and the errors.
#include "posenc/kernels/q8_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr int64_t kBlk = 32;

// A Q8_0 matrix [rows, cols]: random codes in [-128, 127], random binary16 scales around 2^-6.
std::vector<uint8_t> RandomQ8(int64_t rows, int64_t cols, std::mt19937& rng) {
  std::vector<uint8_t> w(static_cast<size_t>(rows * cols / kBlk * 34));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(0.5f / 64, 2.0f / 64);
  for (size_t b = 0; b < w.size() / 34; ++b) {
    const uint16_t h = F32ToF16(scale(rng));
    std::memcpy(&w[b * 34], &h, 2);
    for (int k = 0; k < 32; ++k) w[b * 34 + 2 + k] = static_cast<uint8_t>(byte(rng));
  }
  return w;
}

float WeightScale(const std::vector<uint8_t>& w, int64_t cols, int64_t r, int64_t b) {
  uint16_t h;
  std::memcpy(&h, &w[static_cast<size_t>((r * (cols / kBlk) + b) * 34)], 2);
  return F16ToF32(h);
}
int WeightCode(const std::vector<uint8_t>& w, int64_t cols, int64_t r, int64_t c) {
  return static_cast<int8_t>(w[static_cast<size_t>((r * (cols / kBlk) + c / kBlk) * 34 + 2 + c % kBlk)]);
}

// ggml's quantize_row_q8_0_ref for one row, written out: codes (without the +128) and float16 scales.
void ReferenceQuantize(const float* x, int64_t cols, std::vector<int>& q, std::vector<float>& d) {
  q.assign(static_cast<size_t>(cols), 0);
  d.assign(static_cast<size_t>(cols / kBlk), 0.0f);
  for (int64_t b = 0; b < cols / kBlk; ++b) {
    float amax = 0.0f;
    for (int64_t k = 0; k < kBlk; ++k) amax = std::max(amax, std::fabs(x[b * kBlk + k]));
    const float db = amax / 127.0f;
    const float id = db != 0.0f ? 1.0f / db : 0.0f;
    d[static_cast<size_t>(b)] = F16ToF32(F32ToF16(db));
    if (d[static_cast<size_t>(b)] == 0.0f) continue;  // contributes 0 whatever the codes
    for (int64_t k = 0; k < kBlk; ++k) {
      q[static_cast<size_t>(b * kBlk + k)] = static_cast<int>(std::roundf(x[b * kBlk + k] * id));
    }
  }
}

std::vector<Q8Kernel> Kernels() {
  std::vector<Q8Kernel> k{Q8Kernel::kScalar};
  if (Q8VnniAvailable()) k.push_back(Q8Kernel::kVnni);
  return k;
}

// Activations that stress the rounding: random normals, then per block a pattern.
std::vector<float> AwkwardActivations(int64_t n, int64_t cols, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(n * cols));
  for (float& v : x) v = normal(rng);
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t b = 0; b < cols / kBlk; ++b) {
      float* xb = x.data() + t * cols + b * kBlk;
      switch ((t + b) % 5) {
        case 0:  // amax 127: codes are the values, exact halves round away from zero
          xb[0] = 127.0f;
          for (int k = 1; k < kBlk; ++k) xb[k] = static_cast<float>(k % 9) - 4.0f + ((k % 2) ? 0.5f : -0.5f);
          xb[5] = 0.49999997f;
          xb[6] = -0.49999997f;
          xb[7] = -0.0f;
          break;
        case 1: std::fill(xb, xb + kBlk, 0.0f); break;
        case 2:  // a float16 scale of 0
          for (int k = 0; k < kBlk; ++k) xb[k] = 1e-7f * normal(rng);
          break;
        case 3:  // wide range
          for (int k = 0; k < kBlk; ++k) xb[k] *= std::ldexp(1.0f, (k % 13) - 6);
          break;
        default: break;
      }
    }
  }
  return x;
}

TEST(Q8Matmul, QuantizationIsGgmlsRoundingOnAwkwardValues) {
  std::mt19937 rng(11);
  const int64_t n = 7, cols = 10 * kBlk;
  const std::vector<float> x = AwkwardActivations(n, cols, rng);
  for (Q8Kernel kernel : Kernels()) {
    std::vector<int8_t> q(static_cast<size_t>(n * cols));
    std::vector<uint8_t> finite(static_cast<size_t>(n));
    std::vector<float> d(static_cast<size_t>(n * cols / kBlk));
    QuantizeQ8Rows(n, cols, x.data(), cols, q.data(), d.data(), finite.data(), kernel);
    for (int64_t t = 0; t < n; ++t) {
      ASSERT_EQ(finite[static_cast<size_t>(t)], 1);
      std::vector<int> rq;
      std::vector<float> rd;
      ReferenceQuantize(x.data() + t * cols, cols, rq, rd);
      for (int64_t b = 0; b < cols / kBlk; ++b) {
        ASSERT_EQ(d[static_cast<size_t>(t * cols / kBlk + b)], rd[static_cast<size_t>(b)]) << "row " << t << " block " << b;
        if (rd[static_cast<size_t>(b)] == 0.0f) continue;
        for (int64_t k = 0; k < kBlk; ++k) {
          const int64_t c = b * kBlk + k;
          ASSERT_EQ(static_cast<int>(q[static_cast<size_t>(t * cols + c)]), rq[static_cast<size_t>(c)])
              << "row " << t << " column " << c << " value " << x[static_cast<size_t>(t * cols + c)];
        }
      }
    }
  }
  // The pattern reached the cases it is for (block 0 of row 0 has scale 1): -2.5 -> -3, -0.5 -> -1,
  // 0.49999997 -> 0, 3.5 -> 4.
  std::vector<int> rq;
  std::vector<float> rd;
  ReferenceQuantize(x.data(), cols, rq, rd);
  EXPECT_EQ(rd[0], 1.0f);
  EXPECT_EQ(rq[0], 127);
  EXPECT_EQ(rq[1], -3);
  EXPECT_EQ(rq[3], -1);
  EXPECT_EQ(rq[5], 0);
  EXPECT_EQ(rq[8], 4);
}

// The float64 value of the stated semantics for output (t, r): exact integer block sums times the float32
// product of the scales, summed over blocks in float64; and sum_b |dw dx s_b| for the gamma_B bound.
struct Semantic {
  double value = 0, abs = 0;
};
Semantic SemanticOutput(const std::vector<uint8_t>& w, int64_t cols, int64_t r, const std::vector<int>& q,
                        const std::vector<float>& d) {
  Semantic s;
  for (int64_t b = 0; b < cols / kBlk; ++b) {
    int64_t sum = 0;
    for (int64_t k = 0; k < kBlk; ++k) sum += static_cast<int64_t>(q[static_cast<size_t>(b * kBlk + k)]) *
                                               WeightCode(w, cols, r, b * kBlk + k);
    const float scale = WeightScale(w, cols, r, b) * d[static_cast<size_t>(b)];
    s.value += static_cast<double>(scale) * static_cast<double>(sum);
    s.abs += std::fabs(static_cast<double>(scale) * static_cast<double>(sum));
  }
  return s;
}

double Gamma(int64_t m) {
  const double u = std::ldexp(1.0, -24);
  return static_cast<double>(m) * u / (1.0 - static_cast<double>(m) * u);
}

void CheckProduct(int64_t n, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  const std::vector<uint8_t> w = RandomQ8(rows, cols, rng);
  const std::vector<float> x = AwkwardActivations(n, cols, rng);
  const Q8Weights packed(rows, cols, w.data());
  EXPECT_EQ(packed.rows(), rows);
  EXPECT_EQ(packed.bytes(), (rows + 15) / 16 * 16 * cols / kBlk * 36);
  std::vector<float> scalar(static_cast<size_t>(n * rows), -1.0f);
  packed.Multiply(n, x.data(), cols, scalar.data(), rows, 0.0f, 1, Q8Kernel::kScalar);
  const int64_t n_blocks = cols / kBlk;
  for (int64_t t = 0; t < n; ++t) {
    std::vector<int> q;
    std::vector<float> d;
    ReferenceQuantize(x.data() + t * cols, cols, q, d);
    for (int64_t r = 0; r < rows; ++r) {
      const float y = scalar[static_cast<size_t>(t * rows + r)];
      // The semantics: a float32 sum of B terms (each an exact fma) is within gamma_B of the float64 sum.
      const Semantic s = SemanticOutput(w, cols, r, q, d);
      ASSERT_LE(std::fabs(y - s.value), Gamma(n_blocks) * s.abs) << "t " << t << " r " << r;
      // Against the unquantized product: the documented bound.
      double exact = 0, step = 0;
      for (int64_t b = 0; b < n_blocks; ++b) {
        double amax = 0, wabs = 0;
        for (int64_t k = 0; k < kBlk; ++k) {
          const int64_t c = b * kBlk + k;
          const double wv = static_cast<double>(WeightScale(w, cols, r, b)) * WeightCode(w, cols, r, c);
          exact += static_cast<double>(x[static_cast<size_t>(t * cols + c)]) * wv;
          amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(t * cols + c)])));
          wabs += std::fabs(wv);
        }
        const double db = amax / 127.0;
        step += (db * (0.5 + std::ldexp(1.0, -14)) + 127.0 * std::fabs(d[static_cast<size_t>(b)] - db)) * wabs;
      }
      ASSERT_LE(std::fabs(y - exact), step + Gamma(n_blocks + 1) * s.abs) << "t " << t << " r " << r;
    }
  }
  for (Q8Kernel kernel : Kernels()) {
    for (int threads : {1, 2}) {
      std::vector<float> y(static_cast<size_t>(n * rows), -1.0f);
      packed.Multiply(n, x.data(), cols, y.data(), rows, 0.0f, threads, kernel);
      ASSERT_EQ(std::memcmp(y.data(), scalar.data(), y.size() * 4), 0)
          << "kernel " << static_cast<int>(kernel) << " threads " << threads << " differs from the scalar kernel";
    }
  }
}

TEST(Q8Matmul, ProductsWithinTheirBoundsOnEveryKernel) {
  if (!Q8VnniAvailable()) std::printf("this CPU has no AVX512-VNNI: the scalar kernel only\n");
  CheckProduct(1, 16, 32, 1);
  CheckProduct(3, 37, 5 * kBlk, 2);     // rows not a multiple of 16, n below a tile
  CheckProduct(19, 50, 9 * kBlk, 3);    // n = 2 full tiles of 8 and 3
  CheckProduct(70, 300, 64 * kBlk, 4);  // large enough for two threads (2^20 multiply-adds each)
}

TEST(Q8Matmul, BetaAccumulatesAndStridesAreHonoured) {
  std::mt19937 rng(5);
  const int64_t n = 9, rows = 20, cols = 3 * kBlk, ldx = cols + 7, ldy = rows + 3;
  const std::vector<uint8_t> w = RandomQ8(rows, cols, rng);
  const Q8Weights packed(rows, cols, w.data());
  std::vector<float> x(static_cast<size_t>(n * ldx), 1e30f);  // the gaps must not be read
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> dense(static_cast<size_t>(n * cols));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t c = 0; c < cols; ++c) dense[static_cast<size_t>(t * cols + c)] = x[static_cast<size_t>(t * ldx + c)] = normal(rng);
  }
  std::vector<float> p(static_cast<size_t>(n * rows));
  packed.Multiply(n, dense.data(), cols, p.data(), rows);
  for (Q8Kernel kernel : Kernels()) {
    std::vector<float> y(static_cast<size_t>(n * ldy), 0.25f);
    packed.Multiply(n, x.data(), ldx, y.data(), ldy, 2.0f, 1, kernel);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < ldy; ++r) {
        const float got = y[static_cast<size_t>(t * ldy + r)];
        if (r >= rows) {
          ASSERT_EQ(got, 0.25f) << "the gap between rows of y was written";
        } else {
          ASSERT_EQ(got, std::fma(2.0f, 0.25f, p[static_cast<size_t>(t * rows + r)]));
        }
      }
    }
  }
}

TEST(Q8Matmul, NonFiniteActivationsGiveNanRowsOnly) {
  std::mt19937 rng(6);
  const int64_t n = 4, rows = 17, cols = 2 * kBlk;
  const std::vector<uint8_t> w = RandomQ8(rows, cols, rng);
  const Q8Weights packed(rows, cols, w.data());
  std::vector<float> x(static_cast<size_t>(n * cols), 0.5f);
  x[static_cast<size_t>(1 * cols + 40)] = std::numeric_limits<float>::quiet_NaN();
  x[static_cast<size_t>(2 * cols + 3)] = -std::numeric_limits<float>::infinity();
  for (Q8Kernel kernel : Kernels()) {
    std::vector<float> y(static_cast<size_t>(n * rows), 0.0f);
    packed.Multiply(n, x.data(), cols, y.data(), rows, 0.0f, 1, kernel);
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        const float v = y[static_cast<size_t>(t * rows + r)];
        if (t == 1 || t == 2) {
          ASSERT_TRUE(std::isnan(v)) << t << " " << r;
        } else {
          ASSERT_TRUE(std::isfinite(v)) << t << " " << r;
        }
      }
    }
  }
}

TEST(Q8Matmul, ActivationsBeyondTheFloat16ScaleAreRefused) {
  std::mt19937 rng(7);
  const int64_t rows = 16, cols = 2 * kBlk;
  const std::vector<uint8_t> w = RandomQ8(rows, cols, rng);
  const Q8Weights packed(rows, cols, w.data());
  std::vector<float> x(static_cast<size_t>(2 * cols), 1.0f), y(static_cast<size_t>(2 * rows));
  x[static_cast<size_t>(cols + 40)] = 65504.0f * 127.0f * 1.001f;  // row 1, block 1: max |x| / 127 > 65504
  for (Q8Kernel kernel : Kernels()) {
    testing::ExpectThrowWith<NumericError>([&] { packed.Multiply(2, x.data(), cols, y.data(), rows, 0.0f, 1, kernel); },
                                           {"activation row 1", "values 32-63", "`compute` f32"});
  }
  x[static_cast<size_t>(cols + 40)] = 65504.0f * 127.0f * 0.999f;  // the largest scale float16 holds: runs
  packed.Multiply(2, x.data(), cols, y.data(), rows);
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(Q8Matmul, ErrorsNameTheProblem) {
  const std::vector<uint8_t> w(34 * 2, 0);
  testing::ExpectThrowWith<ShapeError>([&] { Q8Weights(2, 33, w.data()); }, {"multiple of 32", "cols=33"});
  std::vector<uint8_t> bad = w;
  const uint16_t inf = 0x7c00;
  std::memcpy(&bad[34], &inf, 2);
  testing::ExpectThrowWith<ConfigError>([&] { Q8Weights(2, 32, bad.data()); }, {"row 1 block 0", "inf"});
  const Q8Weights packed(2, 32, w.data());
  std::vector<float> x(64), y(4);
  testing::ExpectThrowWith<ShapeError>([&] { packed.Multiply(2, x.data(), 31, y.data(), 2); }, {"ldx=31"});
  testing::ExpectThrowWith<ShapeError>([&] { packed.Multiply(-1, x.data(), 32, y.data(), 2); }, {"got -1"});
  if (!Q8VnniAvailable()) {
    testing::ExpectThrowWith<ConfigError>(
        [&] { packed.Multiply(2, x.data(), 32, y.data(), 2, 0.0f, 1, Q8Kernel::kVnni); }, {"AVX512-VNNI"});
  }
}

}  // namespace
}  // namespace posenc
