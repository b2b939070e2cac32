// LogSumExp (Highway) against LogSumExpScalar, once per Highway target this CPU runs, and both against the
// definition in long double.
//
// Bounds: the terms e^(x_i - m) are the same bits on both paths (ExpF64 lane by lane, same operations); only the
// order of the float64 sum differs, so |sum_simd - sum_scalar| <= 2 (n - 1) 2^-53 sum and the logs differ by at
// most that relative amount of the sum, i.e. absolutely <= 2n * 2^-53 (+ rounding of the final m + log).
// Against long double: ExpF64 is within 2 ulp per term, the sum adds n 2^-53 relative: |error| <= (n + 4) 2^-52.
#include "posenc/kernels/log_sum_exp_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "hwy/tests/hwy_gtest.h"

class LogSumExpKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(LogSumExpKernelTest);

namespace posenc::kernels {
namespace {

long double Reference(const std::vector<float>& x) {
  long double m = x[0];
  for (float v : x) m = std::max<long double>(m, v);
  long double s = 0.0L;
  for (float v : x) s += std::exp(static_cast<long double>(v) - m);
  return m + std::log(s);
}

TEST_P(LogSumExpKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(LogSumExpTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(LogSumExpKernelTest, MatchesScalarAndTheDefinition) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 4.0f);
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 17, 33, 512, 32000}) {
    for (int64_t offset : {0, 1}) {
      std::vector<float> buf(static_cast<size_t>(n + offset));
      for (float& v : buf) v = normal(rng);
      if (n > 3) buf[static_cast<size_t>(offset + 2)] = -800.0f;  // a term below the clamp at -708
      const std::vector<float> x(buf.begin() + offset, buf.end());
      const double simd = LogSumExp(buf.data() + offset, n);
      const double scalar = LogSumExpScalar(buf.data() + offset, n);
      const double scale = std::max(1.0, std::fabs(scalar));
      EXPECT_NEAR(simd, scalar, (2.0 * static_cast<double>(n) + 2.0) * 0x1p-53 * scale) << "n " << n;
      EXPECT_NEAR(simd, static_cast<double>(Reference(x)), (static_cast<double>(n) + 4.0) * 0x1p-52 * scale)
          << "n " << n;
    }
  }
}

TEST(LogSumExpKernel, ExpF64IsWithinTwoUlp) {
  for (double x = -708.0; x <= 0.0; x += 0.0137) {
    const long double want = std::exp(static_cast<long double>(x));
    const double got = ExpF64(x);
    const double ulp = std::nextafter(static_cast<double>(want), 1e300) - static_cast<double>(want);
    ASSERT_LE(std::fabs(static_cast<long double>(got) - want), 2.0L * ulp) << "x = " << x;
  }
}

}  // namespace
}  // namespace posenc::kernels
