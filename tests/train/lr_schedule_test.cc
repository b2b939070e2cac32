// Warm-up then cosine decay, at the points the formula pins down.
#include "posenc/train/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

TEST(LrScheduleTest, WarmupThenCosineToTheFloor) {
  const LrSchedule s{1e-3, 1e-4, 10, 110};
  EXPECT_DOUBLE_EQ(s.At(0), 1e-4);    // (0 + 1) / 10 of max
  EXPECT_DOUBLE_EQ(s.At(4), 5e-4);
  EXPECT_DOUBLE_EQ(s.At(9), 1e-3);
  EXPECT_DOUBLE_EQ(s.At(10), 1e-3);   // cosine starts at max
  EXPECT_NEAR(s.At(60), 0.5 * (1e-3 + 1e-4), 1e-18);  // half way: the mean
  EXPECT_NEAR(s.At(109), 1e-4 + 0.5 * (1 + std::cos(std::numbers::pi * 99 / 100)) * 9e-4, 1e-18);
  EXPECT_DOUBLE_EQ(s.At(110), 1e-4);
  EXPECT_DOUBLE_EQ(s.At(1000), 1e-4);
  const LrSchedule no_warmup{2e-3, 0.0, 0, 4};
  EXPECT_DOUBLE_EQ(no_warmup.At(0), 2e-3);
  EXPECT_NEAR(no_warmup.At(2), 1e-3, 1e-18);
  EXPECT_THROW(s.At(-1), RangeError);
}

TEST(LrScheduleTest, BadSchedulesAreConfigErrors) {
  EXPECT_THROW(ValidateLrSchedule({0.0, 0.0, 0, 1}), ConfigError);
  EXPECT_THROW(ValidateLrSchedule({1e-3, 2e-3, 0, 1}), ConfigError);
  EXPECT_THROW(ValidateLrSchedule({1e-3, 0.0, -1, 1}), ConfigError);
  EXPECT_THROW(ValidateLrSchedule({1e-3, 0.0, 5, 4}), ConfigError);
  ValidateLrSchedule({1e-3, 0.0, 4, 4});
}

}  // namespace
}  // namespace posenc
