// FirstNonFinite (Highway) against FirstNonFiniteScalar, once per Highway target this CPU runs: the index of the
// first NaN / +inf / -inf at every position of arrays of many sizes and offsets, and -1 for finite arrays that
// include the largest finite floats, subnormals and signed zeros.
#include "posenc/kernels/finite_kernels.h"

#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "hwy/tests/hwy_gtest.h"

class FiniteKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(FiniteKernelTest);

namespace posenc::kernels {
namespace {

TEST_P(FiniteKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(FiniteKernelTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(FiniteKernelTest, FindsTheFirstNonFiniteEverywhere) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::signaling_NaN()};
  const float finite[] = {0.0f, -0.0f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                          std::numeric_limits<float>::denorm_min(), 1.5f, -2.25f};
  for (int64_t n : {0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 33, 64, 65, 100}) {
    for (int64_t offset : {0, 1, 3}) {
      std::vector<float> x(static_cast<size_t>(n + offset));
      for (size_t i = 0; i < x.size(); ++i) x[i] = finite[i % 7];
      EXPECT_EQ(FirstNonFinite(x.data() + offset, n), -1) << "n " << n;
      for (int64_t at = 0; at < n; ++at) {
        for (float bad : specials) {
          std::vector<float> y = x;
          y[static_cast<size_t>(offset + at)] = bad;
          if (at + 2 < n) y[static_cast<size_t>(offset + at + 2)] = bad;  // a later one must not win
          ASSERT_EQ(FirstNonFinite(y.data() + offset, n), at) << "n " << n << " offset " << offset;
          ASSERT_EQ(FirstNonFiniteScalar(y.data() + offset, n), at);
        }
      }
    }
  }
}

}  // namespace
}  // namespace posenc::kernels
