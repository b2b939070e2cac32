// posenc demo sinusoidal: every number it prints that has a known value. References: the seed's worked
// example of the demo's specification, closed forms of the frequencies and wavelengths, and the shift identity PE(p+k) = M_k PE(p).
#include "posenc/demo/sinusoidal_demo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

namespace posenc::demo {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;
// SinusoidalTable's documented error for |p| <= 2: 0.5 ulp(float32) of a value <= 1, plus |p| 2^-51.
constexpr double kTableTol = 0x1p-25 + 2.0 * 0x1p-51;

TEST(SinusoidalDemo, WorkedExampleMatchesClosedForm) {
  const SinusoidalDemo demo = RunSinusoidalDemo();
  const SinusoidalWorkedExample& w = demo.worked;
  ASSERT_EQ(w.d_model, 4);
  ASSERT_EQ(w.omega.size(), 2u);
  EXPECT_EQ(w.omega[0], 1.0);
  EXPECT_NEAR(w.omega[1], 0.01, 1e-17);  // 10000^(-1/2) in double
  ASSERT_EQ(w.table.size(), 12u);
  const double expected[3][4] = {{0, 1, 0, 1},
                                 {std::sin(1.0), std::cos(1.0), std::sin(0.01), std::cos(0.01)},
                                 {std::sin(2.0), std::cos(2.0), std::sin(0.02), std::cos(0.02)}};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(w.table[r * 4 + c], expected[r][c], kTableTol) << r << "," << c;
  }
  // PE[0] is exact
  EXPECT_EQ(w.table[0], 0.0f);
  EXPECT_EQ(w.table[1], 1.0f);
}

TEST(SinusoidalDemo, WorkedExampleMatchesTheSeedsRoundedValues) {
  // The specification's numbers: PE[1] = [0.841, 0.540, 0.010, 1.000], PE[2] = [0.909, -0.416, 0.020, 0.9998] (rounded to the
  // digits shown: half a unit of the last digit).
  const SinusoidalWorkedExample w = RunSinusoidalDemo().worked;
  const double pe1[4] = {0.841, 0.540, 0.010, 1.000}, pe2[4] = {0.909, -0.416, 0.020, 0.9998};
  const double tol2[4] = {5e-4, 5e-4, 5e-4, 5e-5};
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(w.table[4 + c], pe1[c], 5e-4) << c;
    EXPECT_NEAR(w.table[8 + c], pe2[c], tol2[c]) << c;
  }
}

TEST(SinusoidalDemo, ClockHandsAreClosedFormWavelengths) {
  const SinusoidalDemo demo = RunSinusoidalDemo();
  ASSERT_FALSE(demo.clock.empty());
  for (const ClockHand& h : demo.clock) {
    // wavelength_i = 2 pi 10000^(2i/d); std::pow in double within 1 ulp, so 4 ulp relative is generous.
    const double expected = kTwoPi * std::pow(10000.0, 2.0 * static_cast<double>(h.pair) / 128.0);
    EXPECT_NEAR(h.wavelength, expected, 4 * 0x1p-52 * expected) << h.pair;
    EXPECT_NEAR(h.omega * h.wavelength, kTwoPi, 4 * 0x1p-52 * kTwoPi);
    EXPECT_NEAR(h.turns, 512.0 / expected, 4 * 0x1p-52 * 512.0 / expected);
  }
  EXPECT_NEAR(demo.clock.front().wavelength, kTwoPi, 1e-15);
}

TEST(SinusoidalDemo, LongestWavelengthIsNotTenThousandTwoPi) {
  const SinusoidalDemo demo = RunSinusoidalDemo();
  const double paper_formula = kTwoPi * std::pow(10000.0, 126.0 / 128.0);  // pair 63 of d = 128
  EXPECT_NEAR(demo.longest_wavelength, paper_formula, 1e-9 * paper_formula);
  EXPECT_NEAR(demo.longest_wavelength, 54410.14, 0.005);  // the printed value
  EXPECT_NEAR(demo.paper_claimed_longest, kTwoPi * 10000.0, 1e-9);
  EXPECT_NEAR(demo.t2t_longest_wavelength, kTwoPi * 10000.0, 1e-9 * kTwoPi * 10000.0);
  EXPECT_LT(demo.longest_wavelength, demo.paper_claimed_longest);
}

TEST(SinusoidalDemo, ShiftMatrixIdentityHoldsWithinRounding) {
  const SinusoidalDemo demo = RunSinusoidalDemo();
  ASSERT_EQ(demo.shifts.size(), 5u);
  for (const ShiftCheck& s : demo.shifts) {
    EXPECT_GE(s.p, 0);
    EXPECT_LE(s.p, 100000);
    EXPECT_GE(s.k, -5000);
    EXPECT_LE(s.k, 5000);
    // bound as derived in the header, recomputed here
    auto e = [](double pos) { return 0x1p-25 + std::fabs(pos) * 0x1p-51; };
    const double bound = std::sqrt(2.0) * e(static_cast<double>(s.p)) + e(static_cast<double>(s.p + s.k)) +
                         (std::fabs(static_cast<double>(s.k)) + 4.0) * 0x1p-51;
    EXPECT_DOUBLE_EQ(s.bound, bound);
    EXPECT_LE(s.max_abs_error, s.bound) << "p=" << s.p << " k=" << s.k;
  }
}

TEST(SinusoidalDemo, RenderPrintsTheKnownValues) {
  const std::string text = RenderSinusoidalDemo(RunSinusoidalDemo());
  auto has = [&](const std::string& s) { EXPECT_NE(text.find(s), std::string::npos) << "missing: " << s; };
  has(fmt::format("PE[1] = [{:9.6f}, {:9.6f}, {:9.6f}, {:9.6f}]", std::sin(1.0), std::cos(1.0), std::sin(0.01),
                  std::cos(0.01)));
  has(fmt::format("PE[2] = [{:9.6f}, {:9.6f}, {:9.6f}, {:9.6f}]", std::sin(2.0), std::cos(2.0), std::sin(0.02),
                  std::cos(0.02)));
  has("omega = [1, 0.01]");
  has(fmt::format("{:.1f} tokens for d = 128", kTwoPi * std::pow(10000.0, 126.0 / 128.0)));
  has(fmt::format("not 2 pi * 10000 = {:.1f}", kTwoPi * 10000.0));
  EXPECT_EQ(text.find("FAIL"), std::string::npos);
}

}  // namespace
}  // namespace posenc::demo
