// llama2.c sampling: the xorshift sequence from the oracle, greedy / top-p / multinomial choices on
// hand-made distributions, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/model/sampler.h"

namespace posenc {
namespace {

TEST(SamplerTest, XorShiftMatchesOracle) {
  // shared/tools/ref_llama2c.py XorShift(133742).u32() x5 and XorShift(42).f32() x3.
  XorShiftRng a(133742);
  for (uint32_t v : {3033531262u, 2674377904u, 2312864567u, 2287415643u, 1408443089u}) EXPECT_EQ(a.NextU32(), v);
  XorShiftRng b(42);
  for (float v : {0.33908522f, 0.7822558f, 0.790137f}) EXPECT_FLOAT_EQ(b.NextF32(), v);
}

TEST(SamplerTest, GreedyTakesTheFirstMaximum) {
  Sampler s(0.0f, 0.9f, 1);
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, TopPKeepsTheNucleus) {
  // probabilities (temperature 1): token 2 has p = 0.9 > topp 0.5, so the nucleus is {2} whatever the coin.
  for (uint64_t seed : {1u, 2u, 3u, 4u, 5u}) {
    Sampler s(1.0f, 0.5f, seed);
    std::vector<float> logits = {std::log(0.05f), std::log(0.05f), std::log(0.9f)};
    EXPECT_EQ(s.Sample(logits), 2);
  }
}

TEST(SamplerTest, MultinomialFollowsTheCoin) {
  // topp = 1 samples from the whole distribution: with p = (0.25, 0.75) the coin c picks 0 iff c < 0.25.
  for (uint64_t seed : {7u, 8u, 9u, 10u}) {
    XorShiftRng rng(seed);
    const float coin = rng.NextF32();
    Sampler s(1.0f, 1.0f, seed);
    std::vector<float> logits = {std::log(0.25f), std::log(0.75f)};
    EXPECT_EQ(s.Sample(logits), coin < 0.25f ? 0 : 1) << "coin " << coin;
  }
}

TEST(SamplerTest, RejectsBadSettings) {
  EXPECT_THROW(Sampler(-1.0f, 0.9f, 1), ConfigError);
  EXPECT_THROW(Sampler(NAN, 0.9f, 1), ConfigError);
  EXPECT_THROW(Sampler(1.0f, 1.5f, 1), ConfigError);
  EXPECT_THROW(Sampler(1.0f, -0.1f, 1), ConfigError);
  Sampler s(1.0f, 0.9f, 1);
  std::vector<float> empty;
  EXPECT_THROW(s.Sample(empty), ShapeError);
}

}  // namespace
}  // namespace posenc
