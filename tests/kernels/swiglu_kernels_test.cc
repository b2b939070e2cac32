// SwiGlu (Highway) against SwiGluScalar, once per Highway target this CPU runs: bit for bit, because every lane
// performs the reference's float32 operations in the reference's order (no fused multiply-add; see
// swiglu_kernels.h). Sizes 1, 3, 7, 8, 9, 16, 17, 33, 100, 1000 at unaligned offsets cover the vector loop, the
// scalar tail and the 1-lane SCALAR target; inputs span the clamps of the exponential (|x| > 88).
#include "posenc/kernels/swiglu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "hwy/tests/hwy_gtest.h"
#include "posenc/kernels/exp_kernel.h"

class SwiGluKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(SwiGluKernelTest);

namespace posenc::kernels {
namespace {

TEST_P(SwiGluKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(SwiGluTargetName(), hwy::TargetName(GetParam()));
}

TEST_P(SwiGluKernelTest, MatchesScalarBitForBit) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> wide(-120.0f, 120.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int64_t n : {1, 3, 7, 8, 9, 16, 17, 33, 100, 1000}) {
    for (int64_t offset : {0, 1, 3}) {
      std::vector<float> hb(static_cast<size_t>(n + offset)), hb2(hb.size());
      for (size_t i = 0; i < hb.size(); ++i) {
        hb[i] = i % 5 == 0 ? wide(rng) : normal(rng);
        hb2[i] = normal(rng);
      }
      std::vector<float> ref = hb;
      SwiGluScalar(ref.data() + offset, hb2.data() + offset, n);
      SwiGlu(hb.data() + offset, hb2.data() + offset, n);
      ASSERT_EQ(std::memcmp(hb.data(), ref.data(), hb.size() * sizeof(float)), 0) << "n " << n << " offset " << offset;
    }
  }
}

// silu(x) * y against the definition in double: within 4 ulp (ExpF32's 2 ulp, then a division and two products,
// each rounded once) for x where e^-x is not clamped.
TEST_P(SwiGluKernelTest, AgreesWithTheDefinition) {
  std::vector<float> hb, hb2;
  for (float x = -80.0f; x <= 80.0f; x += 0.37f) {
    hb.push_back(x);
    hb2.push_back(1.25f);
  }
  const std::vector<float> x = hb;
  SwiGlu(hb.data(), hb2.data(), static_cast<int64_t>(hb.size()));
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = static_cast<double>(x[i]) / (1.0 + std::exp(-static_cast<double>(x[i]))) * 1.25;
    const double ulp = std::nextafter(std::fabs(static_cast<float>(want)), INFINITY) - std::fabs(static_cast<float>(want));
    EXPECT_LE(std::fabs(hb[i] - want), 4 * ulp + 1e-45) << "x = " << x[i];
  }
}

TEST_P(SwiGluKernelTest, NanPropagates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> hb = {1.0f, nan, 2.0f, 3.0f, -1.0f, 0.5f, 7.0f, 8.0f, 9.0f};
  std::vector<float> hb2 = {1.0f, 1.0f, nan, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, nan};
  SwiGlu(hb.data(), hb2.data(), 9);
  EXPECT_TRUE(std::isnan(hb[1]));
  EXPECT_TRUE(std::isnan(hb[2]));
  EXPECT_TRUE(std::isnan(hb[8]));
  EXPECT_TRUE(std::isfinite(hb[0]));
}

}  // namespace
}  // namespace posenc::kernels
