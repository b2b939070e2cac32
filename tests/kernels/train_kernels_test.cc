// The training row kernels (SwiGLU forward/backward, log-sum-exp and softmax rows) on every Highway target this CPU
// has, against float64 evaluations and their scalar twins: lengths around the vector width (tails), unaligned
// starts, arguments past exp's range (sigmoid of +-200), rows with a large spread.
//
// Bounds (u = 2^-24), each from the kernel's stated precision (train_kernels.h):
//   sigmoid: exp 1 ulp, 1 + t 1u, the quotient 1u: s within 3u relative (t / (1 + t) and 1 / (1 + t) have condition
//     <= 1 in t), so h = a s b within 5u |h| (plus 2^-126 absolute: sigmoid(-200) underflows float32); the gradient terms add 3 roundings each: 8u of the sum of magnitudes
//     (the 1 - s term carries s's absolute error 3u s).
//   log-sum-exp: each exp within 1 ulp relative, the float64 sum and log exact to 2^-50: |err| <= 2u + 2^-50 |lse|
//     (the max subtraction is exact: x - m with |x - m| < 2 m or a Sterbenz case is not guaranteed, so also u |x - m|
//     per term: |err| <= 2u + u max|x - m|).
//   softmax rows: exp(x - lse) * scale: the subtraction u |x - lse|, exp 1 ulp, the product 1u: relative
//     (2 + |x - lse|) u.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "posenc/kernels/train_kernels.h"

namespace posenc::kernels {
namespace {

constexpr double kU = 0x1p-24;
constexpr double kTiny = 0x1p-126;  // below float32's smallest normal no relative bound holds (sigmoid(-200) = 1e-87)
const int64_t kLengths[] = {1, 3, 7, 8, 9, 15, 16, 17, 33, 172, 513};

std::vector<float> Random(size_t n, uint64_t seed, double scale) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ud(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(ud(rng));
  return v;
}

double Sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

TEST(TrainKernelsTest, SwiGluMatchesFloat64OnEveryTarget) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(TrainKernelTargetName(), hwy::TargetName(target));
    for (int64_t n : kLengths) {
      SCOPED_TRACE(n);
      std::vector<float> a = Random(n + 1, n, 12.0), b = Random(n + 1, n + 1, 2.0), g = Random(n + 1, n + 2, 1.0);
      a[1] = 200.0f;
      if (n > 2) a[2] = -200.0f;
      for (int variant = 0; variant < 2; ++variant) {
        std::vector<float> h(n + 1, -7.0f), dg = Random(n + 1, n + 3, 1.0), du = Random(n + 1, n + 4, 1.0);
        const std::vector<float> dg0 = dg, du0 = du;
        // offset 1: unaligned starts
        if (variant == 0) {
          SwiGluForwardRow(a.data() + 1, b.data() + 1, n, h.data() + 1);
          SwiGluBackwardRow(g.data() + 1, a.data() + 1, b.data() + 1, n, dg.data() + 1, du.data() + 1);
        } else {
          SwiGluForwardRowScalar(a.data() + 1, b.data() + 1, n, h.data() + 1);
          SwiGluBackwardRowScalar(g.data() + 1, a.data() + 1, b.data() + 1, n, dg.data() + 1, du.data() + 1);
        }
        EXPECT_EQ(h[0], -7.0f) << "wrote before the row";
        for (int64_t i = 1; i <= n; ++i) {
          const double x = a[i], y = b[i], z = g[i], s = Sigmoid(x);
          ASSERT_LE(std::fabs(h[i] - x * s * y), 5 * kU * std::fabs(x * s * y) + kTiny) << variant << " " << i;
          const double t1 = z * y * s * (1 + x * (1 - s)), m1 = std::fabs(z * y) * s * (1 + std::fabs(x) * (1 - s) + 3 * std::fabs(x) * s);
          ASSERT_LE(std::fabs(dg[i] - (dg0[i] + t1)), 8 * kU * (m1 + std::fabs(dg0[i])) + kTiny) << variant << " " << i;
          ASSERT_LE(std::fabs(du[i] - (du0[i] + z * x * s)), 8 * kU * (std::fabs(z * x * s) + std::fabs(du0[i])) + kTiny);
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(TrainKernelsTest, SoftmaxRowsMatchFloat64OnEveryTarget) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (int64_t n : kLengths) {
      SCOPED_TRACE(n);
      std::vector<float> x = Random(n + 1, 100 + n, 40.0);  // spread: exps from e^-80 to 1
      double m = -INFINITY;
      for (int64_t i = 1; i <= n; ++i) m = std::max(m, double(x[i]));
      double sum = 0;
      for (int64_t i = 1; i <= n; ++i) sum += std::exp(double(x[i]) - m);
      const double ref = m + std::log(sum);
      const float lse = static_cast<float>(ref), scale = 0.37f;
      std::vector<float> simd = x, scalar = x;
      SoftmaxScaleRow(simd.data() + 1, n, lse, scale);
      SoftmaxScaleRowScalar(scalar.data() + 1, n, lse, scale);
      EXPECT_EQ(simd[0], x[0]);
      for (int64_t i = 1; i <= n; ++i) {
        const double e = std::exp(double(x[i]) - lse) * scale, bound = (2 + std::fabs(double(x[i]) - lse)) * kU * e;
        ASSERT_LE(std::fabs(simd[i] - e), bound + 1e-45) << i;
        ASSERT_LE(std::fabs(scalar[i] - e), bound + 1e-45) << i;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace posenc::kernels
