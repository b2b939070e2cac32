// The eval methods mapped onto posenc/rope: factors, folded attention factor, per-row dynamic tables, and the
// user-parameterised llama3 / longrope methods.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"
#include "posenc/model/methods.h"
#include "posenc/rope/frequencies.h"

namespace posenc {
namespace {

const ModelConfig& Config() { return testing::Stories260K().config(); }

TEST(MethodsTest, FactorIsMaxOfOneAndLOverL0UnlessFixed) {
  EXPECT_EQ(BuildMethodRope(RopeMethod::kLinear, 2048, Config()).factor, 4.0);
  EXPECT_EQ(BuildMethodRope(RopeMethod::kNtk, 1024, Config()).factor, 2.0);
  EXPECT_EQ(BuildMethodRope(RopeMethod::kYarn, 256, Config()).factor, 1.0);
  EXPECT_EQ(BuildMethodRope(RopeMethod::kNone, 2048, Config()).factor, 1.0);
  EXPECT_EQ(BuildMethodRope(RopeMethod::kDynamic, 2048, Config()).factor, 1.0);  // HF factor; base grows with p
  MethodOptions fixed;
  fixed.factor = 8.0;
  EXPECT_EQ(BuildMethodRope(RopeMethod::kLinear, 256, Config(), fixed).factor, 8.0);
  fixed.factor = 0.5;
  EXPECT_THROW(BuildMethodRope(RopeMethod::kLinear, 256, Config(), fixed), ConfigError);
}

TEST(MethodsTest, LinearDividesPositionsByS) {
  // linear at s = 4: row t has the angles of plain RoPE at position t / 4 (exact for t = 4u).
  const MethodRope lin = BuildMethodRope(RopeMethod::kLinear, 2048, Config());
  const MethodRope none = BuildMethodRope(RopeMethod::kNone, 2048, Config());
  for (int64_t u : {1, 3, 100, 511}) {
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_NEAR(lin.table().cos[(4 * u) * 4 + i], none.table().cos[u * 4 + i], 1e-6) << u << " " << i;
      EXPECT_NEAR(lin.table().sin[(4 * u) * 4 + i], none.table().sin[u * 4 + i], 1e-6) << u << " " << i;
    }
  }
}

TEST(MethodsTest, YarnFoldsItsAttentionFactorIntoCosAndSin) {
  const MethodRope yarn = BuildMethodRope(RopeMethod::kYarn, 2048, Config());
  const double a = 0.1 * std::log(4.0) + 1.0;  // YaRN paper eq. 22 / HF get_mscale
  for (int64_t t : {0, 7, 1000}) {
    for (int64_t i = 0; i < 4; ++i) {
      const double c = yarn.table().cos[t * 4 + i], s = yarn.table().sin[t * 4 + i];
      EXPECT_NEAR(std::sqrt(c * c + s * s), a, 1e-6);
    }
  }
}

// The user's yarn parameters reach the library's params, and the table follows them: an explicit
// attention_factor is the magnitude of every (cos, sin) pair, and beta_fast / beta_slow move the ramp (the
// frequencies equal those of the same parameters computed directly).
TEST(MethodsTest, YarnTakesTheUsersParameters) {
  MethodOptions o;
  o.yarn.beta_fast = 2.0;
  o.yarn.beta_slow = 0.5;
  o.yarn.attention_factor = 1.25;
  const ModelConfig& c = Config();
  const RopeParams p = MethodRopeParams(RopeMethod::kYarn, 2048, c, c.layers[0].rope_params, o);
  EXPECT_EQ(p.beta_fast, 2.0);
  EXPECT_EQ(p.beta_slow, 0.5);
  EXPECT_EQ(p.attention_factor, 1.25);
  EXPECT_FALSE(p.mscale.has_value());
  const MethodRope yarn = BuildMethodRope(RopeMethod::kYarn, 2048, c, o);
  for (int64_t t : {0, 7, 1000}) {
    for (int64_t i = 0; i < 4; ++i) {
      const double cs = yarn.table().cos[t * 4 + i], sn = yarn.table().sin[t * 4 + i];
      EXPECT_NEAR(std::sqrt(cs * cs + sn * sn), 1.25, 1e-6);
    }
  }
  EXPECT_EQ(yarn.frequencies[0].inv_freq, ComputeRopeFrequencies(p).inv_freq);
  const MethodRope plain = BuildMethodRope(RopeMethod::kYarn, 2048, c);
  EXPECT_NE(yarn.frequencies[0].inv_freq, plain.frequencies[0].inv_freq);  // the ramp moved
  // --no-truncate: HF's truncate false (the correction range kept fractional), exactly ComputeRopeFrequencies'.
  o.yarn = {};
  o.yarn.no_truncate = true;
  const RopeParams fractional = MethodRopeParams(RopeMethod::kYarn, 2048, c, c.layers[0].rope_params, o);
  EXPECT_FALSE(fractional.truncate);
  EXPECT_TRUE(MethodRopeParams(RopeMethod::kYarn, 2048, c, c.layers[0].rope_params).truncate);
  EXPECT_EQ(BuildMethodRope(RopeMethod::kYarn, 2048, c, o).frequencies[0].inv_freq,
            ComputeRopeFrequencies(fractional).inv_freq);
  o.yarn = {};
  o.yarn.beta_fast = -1.0;
  EXPECT_THROW(ValidateMethodRope(RopeMethod::kYarn, 2048, c, o), ConfigError);
}

TEST(MethodsTest, DynamicTablesFollowTheRowsSequenceLength) {
  const MethodRope hf = BuildMethodRope(RopeMethod::kDynamicHf, 1024, Config());
  const MethodRope pre = BuildMethodRope(RopeMethod::kDynamic, 1024, Config());
  ASSERT_NE(pre.pre_rotation(), nullptr);
  EXPECT_EQ(hf.pre_rotation(), nullptr);
  for (int64_t t : {0, 511, 512, 1023}) {
    const RopeFrequencies f = ComputeRopeFrequencies(hf.params, t + 1);
    const int64_t pos[1] = {t};
    const CosSinTable row = ComputeCosSin(f, pos);
    for (int64_t i = 0; i < 4; ++i) {
      EXPECT_EQ(hf.table().cos[t * 4 + i], row.cos[i]) << t;  // dynamic-hf: row t = position t at base(t + 1)
      if (t >= 512) {
        EXPECT_EQ(pre.pre_rotation()->at(t, 0, i, t), row.cos[i]) << t;  // pre-rotation row t at position t
      }
    }
    EXPECT_EQ(pre.pre_rotation()->shared(t), t + 1 <= 512) << t;  // base(p + 1) = base while p + 1 <= L0
  }
  // Row 1000 rotates key 3 with base(1001), not with base(4).
  const RopeFrequencies f1001 = ComputeRopeFrequencies(hf.params, 1001);
  const int64_t three[1] = {3};
  EXPECT_EQ(pre.pre_rotation()->at(1000, 1, 2, 3), ComputeCosSin(f1001, three).sin[2]);
}

TEST(MethodsTest, Llama3AndLongropeRunWithUserParameters) {
  MethodOptions opts;
  RopeParams llama3;
  llama3.rope_type = RopeType::kLlama3;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  opts.llama3 = llama3;
  RopeParams longrope;
  longrope.rope_type = RopeType::kLongrope;
  longrope.short_factor = {1.0, 1.0, 1.0, 1.0};
  longrope.long_factor = {1.0, 1.5, 2.0, 4.0};
  opts.longrope = longrope;
  const MethodRope l3 = BuildMethodRope(RopeMethod::kLlama3, 1024, Config(), opts);
  EXPECT_EQ(l3.factor, 2.0);
  // llama3: pair 0 (wavelength 6.3 tokens < L0 / high_freq_factor) is kept, pair 3 (6283 > L0 / low) is / s.
  const MethodRope none = BuildMethodRope(RopeMethod::kNone, 1024, Config());
  EXPECT_NEAR(l3.table().sin[100 * 4 + 0], none.table().sin[100 * 4 + 0], 1e-7);
  EXPECT_NEAR(l3.table().sin[100 * 4 + 3], none.table().sin[50 * 4 + 3], 1e-6);
  // longrope past L0: the long factors divide inv_freq (pair 3 by 4), with its attention factor folded in.
  const MethodRope lr = BuildMethodRope(RopeMethod::kLongrope, 1024, Config(), opts);
  const RopeFrequencies f = ComputeRopeFrequencies(lr.params, 1024);
  EXPECT_NEAR(f.inv_freq[3], 0.001 / 4.0, 1e-9);
  const double a = f.attention_factor;
  EXPECT_NEAR(lr.table().cos[400 * 4 + 3], a * std::cos(400 * f.inv_freq[3]), 1e-6);
  RopeParams wrong = llama3;
  wrong.head_dim = 16;
  opts.llama3 = wrong;
  EXPECT_THROW(BuildMethodRope(RopeMethod::kLlama3, 1024, Config(), opts), ConfigError);
}

}  // namespace
}  // namespace posenc
