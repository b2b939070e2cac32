// The seed explanation's worked RoPE example, d = 4, base 10000: theta = [1, 0.01] rad/token; at position 1
// the first pair turns by 1 rad (57.3 degrees) and the second by 0.01 rad (0.573 degrees).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

namespace posenc {
namespace {

TEST(SeedExample, RopeThetaForHeadDim4) {
  const std::vector<float> inv = DefaultInvFreq(10000.0, 4);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0], 1.0f);
  EXPECT_EQ(inv[1], 0.01f);  // 10000^(-2/4) = 0.01, correctly rounded to float32
  EXPECT_NEAR(inv[0] * 180.0 / std::numbers::pi, 57.2958, 5e-5);
  EXPECT_NEAR(inv[1] * 180.0 / std::numbers::pi, 0.572958, 5e-7);
}

TEST(SeedExample, PositionOneRotationOfAVector) {
  RopeParams p;
  p.head_dim = 4;
  const CosSinTable t = ComputeCosSin(ComputeRopeFrequencies(p), std::vector<int64_t>{1});
  const int64_t row = 0;
  // x = [1, 0, 1, 0] in interleaved pairs (x0, x1), (x2, x3): each pair is the unit vector along its first
  // axis, so rotation by phi gives (cos phi, sin phi).
  std::vector<float> x = {1, 0, 1, 0};
  ApplyRope(HeadsView::Contiguous(x.data(), 1, 1, 4), std::span<const int64_t>(&row, 1), View(t),
            RopeLayout::kInterleaved);
  EXPECT_FLOAT_EQ(x[0], std::cos(1.0f));
  EXPECT_FLOAT_EQ(x[1], std::sin(1.0f));
  EXPECT_FLOAT_EQ(x[2], std::cos(0.01f));
  EXPECT_FLOAT_EQ(x[3], std::sin(0.01f));
  EXPECT_NEAR(x[0], 0.540302, 5e-7);
  EXPECT_NEAR(x[1], 0.841471, 5e-7);
  EXPECT_NEAR(x[2], 0.99995, 5e-6);
  EXPECT_NEAR(x[3], 0.0099998, 5e-8);
  // the same rotation in the half-split layout pairs (x0, x2), (x1, x3)
  std::vector<float> y = {1, 1, 0, 0};
  ApplyRope(HeadsView::Contiguous(y.data(), 1, 1, 4), std::span<const int64_t>(&row, 1), View(t),
            RopeLayout::kHalfSplit);
  EXPECT_EQ(y[0], x[0]);
  EXPECT_EQ(y[2], x[1]);
  EXPECT_EQ(y[1], x[2]);
  EXPECT_EQ(y[3], x[3]);
}

}  // namespace
}  // namespace posenc
