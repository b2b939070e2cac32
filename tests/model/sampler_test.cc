// llama2.c sampling: the xorshift sequence from the oracle, greedy / top-p / multinomial choices on
// hand-made distributions, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/model/sampler.h"

namespace posenc {
namespace {

TEST(SamplerTest, XorShiftMatchesOracle) {
  // The numpy oracle's XorShift(133742).u32() x5 and XorShift(42).f32() x3.
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

// A flat distribution with topp below 1/n: every probability (1/n) is under llama2.c's cutoff
// (1 - topp) / (n - 1), so its candidate list is empty (llama2.c then reads index -1). The nucleus keeps the most
// probable token instead (HF min_tokens_to_keep = 1).
TEST(SamplerTest, EmptyNucleusKeepsTheMostProbableToken) {
  for (uint64_t seed : {7u, 8u, 9u}) {
    std::vector<float> logits(512, 0.25f);
    logits[300] = 0.2500001f;  // the most probable by a hair: every probability still below the cutoff
    Sampler s(1e6f, 0.001f, seed);
    EXPECT_EQ(s.Sample(logits), 300);
  }
}

// T -> 0 is greedy: logits / 1e-38 overflow float32 (to +-inf), which made every probability NaN (inf - inf)
// and returned the last token. Both the multinomial (topp 1) and the nucleus path must take the first maximum,
// for positive and negative logits.
TEST(SamplerTest, TinyTemperatureIsGreedy) {
  for (float topp : {1.0f, 0.9f, 0.0f}) {
    for (float shift : {0.0f, -50.0f, 50.0f}) {
      std::vector<float> logits = {1.0f + shift, 3.5f + shift, -2.0f + shift, 3.5f + shift, 0.0f + shift};
      Sampler s(1e-38f, topp, 42);
      EXPECT_EQ(s.Sample(logits), 1) << "topp " << topp << " shift " << shift;
    }
  }
  // A temperature small enough to separate the logits without overflowing: the same choice.
  std::vector<float> logits = {0.1f, 0.3f, 0.2f};
  Sampler s(1e-30f, 1.0f, 42);
  EXPECT_EQ(s.Sample(logits), 1);
}

TEST(SamplerTest, NonFiniteLogitsAreAnErrorNamingTheIndex) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    for (float temperature : {0.0f, 1.0f}) {
      Sampler s(temperature, 0.9f, 42);
      std::vector<float> logits = {0.5f, 1.0f, bad, 0.0f};
      try {
        s.Sample(logits);
        ADD_FAILURE() << "no error for logit " << bad;
      } catch (const NumericError& e) {
        EXPECT_NE(std::string(e.what()).find("logits[2]"), std::string::npos) << e.what();
      }
    }
  }
}

// xorshift's state 0 is a fixed point (every draw 0): a Sampler refuses it (Generate maps seed 0 to the clock).
TEST(SamplerTest, SeedZeroIsRefused) {
  XorShiftRng frozen(0);
  EXPECT_EQ(frozen.NextU32(), 0u);
  EXPECT_EQ(frozen.NextU32(), 0u);
  EXPECT_THROW(Sampler(1.0f, 0.9f, 0), ConfigError);
}

}  // namespace
}  // namespace posenc
