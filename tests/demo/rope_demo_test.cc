// posenc demo rope: the worked example of the demo's specification, the relative-position identity, the exact score formula
// against an independent double-precision rotation, and RoFormer's decay bound against closed forms.
#include "posenc/demo/rope_demo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"

namespace posenc::demo {
namespace {

// <R(m) q, R(n) k> with the rotation done in double (independent of ApplyRope): pair (2i, 2i+1) turns by
// pos * inv_freq[i] (the library's float32 inv_freq, so the angles are the ones the demo rotates by).
double DoubleRotatedScore(const std::vector<float>& q, const std::vector<float>& k, int64_t m, int64_t n) {
  const std::vector<float> inv = DefaultInvFreq(10000.0, static_cast<int64_t>(q.size()));
  double s = 0.0;
  for (size_t i = 0; i < inv.size(); ++i) {
    const double am = static_cast<double>(m) * inv[i], an = static_cast<double>(n) * inv[i];
    const double q0 = q[2 * i] * std::cos(am) - q[2 * i + 1] * std::sin(am);
    const double q1 = q[2 * i] * std::sin(am) + q[2 * i + 1] * std::cos(am);
    const double k0 = k[2 * i] * std::cos(an) - k[2 * i + 1] * std::sin(an);
    const double k1 = k[2 * i] * std::sin(an) + k[2 * i + 1] * std::cos(an);
    s += q0 * k0 + q1 * k1;
  }
  return s;
}

double AbsPairSum(const std::vector<float>& q, const std::vector<float>& k) {
  double s = 0.0;
  for (size_t i = 0; 2 * i + 1 < q.size(); ++i) {
    s += (std::fabs(q[2 * i]) + std::fabs(q[2 * i + 1])) * (std::fabs(k[2 * i]) + std::fabs(k[2 * i + 1]));
  }
  return s;
}

// RunRopeDemo sweeps 65536 distances for the decay windows: compute it once.
const RopeDemo& Demo() {
  static const RopeDemo demo = RunRopeDemo();
  return demo;
}

TEST(RopeDemo, WorkedExampleThetaAndTurns) {
  const RopeWorkedExample w = Demo().worked;
  ASSERT_EQ(w.inv_freq.size(), 2u);
  EXPECT_EQ(w.inv_freq[0], 1.0f);
  EXPECT_EQ(w.inv_freq[1], 0.01f);  // fl32(1 / fl32(10000^0.5)) = fl32(0.01)
  EXPECT_EQ(w.angle_rad[0], 1.0);
  EXPECT_NEAR(w.angle_deg[0], 180.0 / std::numbers::pi, 1e-12);        // 57.2958
  EXPECT_NEAR(w.angle_deg[1], 0.01 * 180.0 / std::numbers::pi, 1e-7);  // 0.5730 (float32 0.01)
  EXPECT_NEAR(w.angle_deg[0], 57.3, 0.05);                             // the seed's rounded values
  EXPECT_NEAR(w.angle_deg[1], 0.57, 0.005);
  // [1, 0, 1, 0] at position 1 -> [cos 1, sin 1, cos .01, sin .01]; the table is within 1 ulp of the true
  // cos/sin of the float32 angle and each output is c*1 - s*0 (exact) : 1 ulp <= 2^-24 for values < 1.
  const double expected[4] = {std::cos(1.0), std::sin(1.0), std::cos(static_cast<double>(0.01f)),
                              std::sin(static_cast<double>(0.01f))};
  for (int c = 0; c < 4; ++c) EXPECT_NEAR(w.rotated[static_cast<size_t>(c)], expected[c], 0x1p-24) << c;
  const std::string text = RenderRopeDemo(Demo());
  EXPECT_NE(text.find("pair 0 turns 1 rad = 57.3 degrees"), std::string::npos);
  EXPECT_NE(text.find("pair 1 turns 0.01 rad = 0.573 degrees"), std::string::npos);
  EXPECT_NE(text.find("theta = [1, 0.01]"), std::string::npos);
}

TEST(RopeDemo, ScoreDependsOnlyOnRelativePosition) {
  const RopeDemo& demo = Demo();
  ASSERT_EQ(demo.relative.size(), 5u);
  for (const RelativeCheck& c : demo.relative) {
    EXPECT_GE(c.t, 1);
    EXPECT_LE(std::fabs(c.score - c.shifted_score), c.bound) << c.m << " " << c.n << " " << c.t;
    // both scores are the same exact value, independently computed in double
    const double exact = DoubleRotatedScore(demo.q, demo.k, c.m, c.n);
    EXPECT_LE(std::fabs(c.score - exact), RopeScoreBound(demo.q, demo.k, c.m, c.n));
    EXPECT_LE(std::fabs(c.shifted_score - exact),
              RopeScoreBound(demo.q, demo.k, c.m + c.t, c.n + c.t) + 1e-9 * AbsPairSum(demo.q, demo.k));
  }
}

TEST(RopeDemo, ExactScoreFormulaEqualsRotatedDotProduct) {
  const RopeDemo& demo = Demo();
  ASSERT_EQ(demo.formula.size(), 5u);
  const double sum = AbsPairSum(demo.q, demo.k);
  for (const ScoreFormulaCheck& c : demo.formula) {
    // the formula is the double rotation, rearranged: they agree to double rounding (angles up to 4096 rad
    // carry 4096 * 2^-52 each)
    EXPECT_NEAR(c.exact_formula, DoubleRotatedScore(demo.q, demo.k, c.m, c.n), 4096.0 * 0x1p-48 * sum);
    EXPECT_LE(std::fabs(c.rotated_dot - c.exact_formula), c.bound);
    EXPECT_NEAR(c.cos_only + c.sin_term, c.exact_formula, 1e-12 * sum);
    // the shortened form is wrong here: it misses by the sin term, far beyond rounding
    EXPECT_GT(std::fabs(c.rotated_dot - c.cos_only), 100.0 * c.bound) << c.m << " " << c.n;
  }
}

TEST(RopeDemo, SmallestCounterexampleToTheCosOnlyForm) {
  const ScoreFormulaCheck u = Demo().unit_example;
  // d = 2, q = (1, 0), k = (0, 1), m = 1, n = 0: R(1) q = (cos 1, sin 1), so the score is sin 1
  EXPECT_NEAR(u.rotated_dot, std::sin(1.0), 0x1p-23);
  EXPECT_NEAR(u.exact_formula, std::sin(1.0), 1e-15);
  EXPECT_EQ(u.cos_only, 0.0);
  const std::string text = RenderRopeDemo(Demo());
  EXPECT_NE(text.find(fmt::format("rotated dot = {:.6f} = sin(1); cos-only form = 0.000000", std::sin(1.0))),
            std::string::npos);
}

TEST(RopeDemo, DecayBoundClosedForms) {
  // D = 0: every S_j = j, so B = (1/(d/2)) sum_{j=1}^{d/2} j = (d/2 + 1)/2
  const std::vector<int64_t> zero = {0};
  EXPECT_DOUBLE_EQ(RopeDecayBound(128, 10000.0, zero)[0], 32.5);
  EXPECT_DOUBLE_EQ(RopeDecayBound(8, 10000.0, zero)[0], 2.5);
  // d = 2: S_1 = e^(i D), |S_1| = 1
  const std::vector<int64_t> ds = {0, 1, 7, 100, 12345};
  for (double b : RopeDecayBound(2, 10000.0, ds)) EXPECT_NEAR(b, 1.0, 1e-15);
  // d = 4: theta = (1, 0.01); S_1 = e^(i D), S_2 = e^(i D) + e^(0.01 i D), |S_2| = |1 + e^(-0.99 i D)|
  // = 2 |cos(0.495 D)|, so B = (1 + 2 |cos(0.495 D)|) / 2
  const std::vector<double> b4 = RopeDecayBound(4, 10000.0, ds);
  for (size_t i = 0; i < ds.size(); ++i) {
    EXPECT_NEAR(b4[i], (1.0 + 2.0 * std::fabs(std::cos(0.495 * static_cast<double>(ds[i])))) / 2.0,
                16.0 * static_cast<double>(ds[i]) * 0x1p-52 + 1e-15)  // angles carry D 2^-52 each, a few of them
        << ds[i];
  }
  EXPECT_THROW(RopeDecayBound(7, 10000.0, zero), ConfigError);
  EXPECT_THROW(RopeDecayBound(8, 1.0, zero), ConfigError);
}

TEST(RopeDemo, DecayTableMatchesDirectSum) {
  const RopeDemo& demo = Demo();
  ASSERT_FALSE(demo.decay.empty());
  EXPECT_EQ(demo.decay.front().distance, 0);
  EXPECT_DOUBLE_EQ(demo.decay.front().bound, 32.5);
  for (const DecayPoint& p : demo.decay) {
    // direct: (1/64) sum_{j=1}^{64} |sum_{i=0}^{j-1} exp(i D 10000^(-2i/128))|, complex exp in double
    double total = 0.0;
    for (int j = 1; j <= 64; ++j) {
      std::complex<double> s = 0.0;
      for (int i = 0; i < j; ++i) {
        s += std::polar(1.0, static_cast<double>(p.distance) * std::pow(10000.0, -2.0 * i / 128.0));
      }
      total += std::abs(s);
    }
    // each term's angle carries <= D 2^-52 (<= 1.5e-11 at D = 65536) in either code; over the 2080 terms of
    // sum_j |S_j| that is <= 3.1e-8, i.e. 4.9e-10 after the 1/64
    EXPECT_NEAR(p.bound, total / 64.0, 1e-9) << p.distance;
  }
  // the text's claim that B is not monotone: some window has a minimum below its own maximum, and B rises
  // somewhere between consecutive distances
  std::vector<int64_t> d(200);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<int64_t>(i);
  const std::vector<double> b = RopeDecayBound(128, 10000.0, d);
  bool rises = false;
  for (size_t i = 1; i < b.size(); ++i) rises = rises || b[i] > b[i - 1];
  EXPECT_TRUE(rises);
  for (const DecayWindow& w : demo.decay_windows) {
    EXPECT_LE(w.min, w.mean);
    EXPECT_LE(w.mean, w.max);
  }
  double level = 0.0;
  for (int j = 1; j <= 64; ++j) level += std::sqrt(std::numbers::pi * j) / 2.0;
  EXPECT_NEAR(demo.random_phase_level, level / 64.0, 1e-12);
}

}  // namespace
}  // namespace posenc::demo
