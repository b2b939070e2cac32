// posenc demo extension: PI / NTK numbers, YaRN regimes and Llama-3 bands for Llama-2 head dims (128,
// base 10000) trained at 2048 and extended x4, each against its closed form.
#include "posenc/demo/extension_demo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <string>

namespace posenc::demo {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;
constexpr double kU = 0x1p-24;

const ExtensionMethod& Find(const ExtensionDemo& demo, const std::string& name) {
  for (const ExtensionMethod& m : demo.methods) {
    if (m.name == name) return m;
  }
  ADD_FAILURE() << "no method " << name;
  return demo.methods.front();
}

TEST(ExtensionDemo, PiCompressesPositionsBySFour) {
  const ExtensionDemo demo = RunExtensionDemo();
  ASSERT_EQ(demo.pi.size(), 3u);
  EXPECT_EQ(demo.pi[0].position, 1024);
  EXPECT_EQ(demo.pi[0].compressed, 256.0);
  EXPECT_EQ(demo.pi[1].position, 4096);
  EXPECT_EQ(demo.pi[1].compressed, 1024.0);
  EXPECT_EQ(demo.pi[2].position, 8191);
  EXPECT_EQ(demo.pi[2].compressed, 2047.75);
  // inv_freq / 4 is exact in float32 and p * inv fits in a double: the angles are identical, not close
  for (const PiPosition& p : demo.pi) EXPECT_EQ(p.max_angle_diff, 0.0) << p.position;
  EXPECT_EQ(demo.pi_pair0_step, 0.25);
  EXPECT_EQ(8192 / demo.factor, 2048.0);
  const ExtensionMethod& orig = Find(demo, "original");
  const ExtensionMethod& pi = Find(demo, "PI");
  for (size_t i = 0; i < orig.wavelength.size(); ++i) EXPECT_EQ(pi.wavelength[i], 4.0 * orig.wavelength[i]) << i;
}

TEST(ExtensionDemo, BaseTimesFourIsNotNtkAware) {
  const ExtensionDemo demo = RunExtensionDemo();
  EXPECT_EQ(demo.base_times_factor, 40000.0);
  EXPECT_DOUBLE_EQ(demo.ntk_exponent, 128.0 / 126.0);
  // 10000 * 4^(128/126) = 10000 * 2^(128/63), computed another way
  EXPECT_NEAR(demo.ntk_base, 10000.0 * std::exp2(128.0 / 63.0), 1e-9);
  EXPECT_NEAR(demo.ntk_base, 40889.94, 0.005);  // the printed value
  // slowest-pair wavelength ratio: exactly s^((d-2)/d) for base x s and s for NTK-aware in real arithmetic.
  // Each float32 inv_freq = fl32(1 / fl32(fl32(base)^fl32(e))) carries: e rounded (u e ln base relative in
  // base^e), pow, reciprocal and the base itself (1 u each, and ln-scaled for the base: u e); so a ratio of
  // two is within u ((e ln b1 + 3 + e) + (e ln b2 + 3 + e)) relative, e = 126/128.
  const double e = 126.0 / 128.0;
  auto tol = [&](double b1, double b2) { return kU * (e * std::log(b1) + e * std::log(b2) + 2 * e + 6.0); };
  EXPECT_NEAR(demo.base_times_lowest_ratio, std::pow(4.0, e), std::pow(4.0, e) * tol(10000.0, 40000.0));
  EXPECT_NEAR(demo.ntk_lowest_ratio, 4.0, 4.0 * tol(10000.0, demo.ntk_base));
  EXPECT_NEAR(demo.base_times_lowest_ratio, 3.914288, 5e-7);  // printed with 6 decimals
  // pair 0 untouched by both
  EXPECT_EQ(Find(demo, "base x4").wavelength[0], Find(demo, "original").wavelength[0]);
  EXPECT_EQ(Find(demo, "NTK-aware").wavelength[0], Find(demo, "original").wavelength[0]);
  const std::string text = RenderExtensionDemo(demo);
  EXPECT_NE(text.find(fmt::format("= {:.2f}", 10000.0 * std::exp2(128.0 / 63.0))), std::string::npos);
  EXPECT_NE(text.find("10000 -> 40000"), std::string::npos);
}

TEST(ExtensionDemo, YarnRegimesFromTheClosedFormCorrectionRange) {
  const ExtensionDemo demo = RunExtensionDemo();
  // corr(r) = d ln(L0 / (2 pi r)) / (2 ln base), Peng et al. 2023 eq. 19 / HF find_correction_dim
  const double fast = 128.0 * std::log(2048.0 / (kTwoPi * 32.0)) / (2.0 * std::log(10000.0));
  const double slow = 128.0 * std::log(2048.0 / (kTwoPi * 1.0)) / (2.0 * std::log(10000.0));
  EXPECT_NEAR(demo.yarn_corr_fast, fast, 1e-12);
  EXPECT_NEAR(demo.yarn_corr_slow, slow, 1e-12);
  EXPECT_NEAR(fast, 16.1280, 5e-5);
  EXPECT_NEAR(slow, 40.2104, 5e-5);
  EXPECT_EQ(demo.yarn_range.low, std::floor(fast));  // 16
  EXPECT_EQ(demo.yarn_range.high, std::ceil(slow));  // 41
  // ramp 0 (kept) for i <= low, 1 (interpolated) for i >= high, blended between
  ASSERT_EQ(demo.yarn_runs.size(), 3u);
  EXPECT_EQ(demo.yarn_runs[0].regime, PairRegime::kKept);
  EXPECT_EQ(demo.yarn_runs[0].first, 0);
  EXPECT_EQ(demo.yarn_runs[0].last, 16);
  EXPECT_EQ(demo.yarn_runs[1].regime, PairRegime::kBlended);
  EXPECT_EQ(demo.yarn_runs[1].last, 40);
  EXPECT_EQ(demo.yarn_runs[2].regime, PairRegime::kInterpolated);
  EXPECT_EQ(demo.yarn_runs[2].first, 41);
  EXPECT_EQ(demo.yarn_runs[2].last, 63);
  // kept pairs are the original frequencies, interpolated ones PI's, bit for bit
  const ExtensionMethod& yarn = Find(demo, "YaRN");
  for (size_t i = 0; i <= 16; ++i) EXPECT_EQ(yarn.wavelength[i], Find(demo, "original").wavelength[i]) << i;
  for (size_t i = 41; i < 64; ++i) EXPECT_EQ(yarn.wavelength[i], Find(demo, "PI").wavelength[i]) << i;
  // attention factor 0.1 ln 4 + 1
  EXPECT_NEAR(demo.yarn_attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
  const std::string text = RenderExtensionDemo(demo);
  EXPECT_NE(text.find("kept 0..16 (17 pairs), blended 17..40 (24 pairs), interpolated 41..63 (23 pairs)"),
            std::string::npos);
  EXPECT_NE(text.find(fmt::format("1/t = {:.6f}", std::pow(0.1 * std::log(4.0) + 1.0, 2))), std::string::npos);
}

TEST(ExtensionDemo, Llama3BandsFromTheClosedFormThresholds) {
  const ExtensionDemo demo = RunExtensionDemo();
  // wavelength_i = 2 pi 10000^(2i/128): kept iff < L0 / high_freq_factor = 512, i.e. i < 64 ln(512/2pi)/ln 1e4;
  // interpolated iff > L0 / low_freq_factor = 2048, i.e. i > 64 ln(2048/2pi)/ln 1e4.
  const double kept_below = 64.0 * std::log(512.0 / kTwoPi) / std::log(10000.0);
  const double interp_above = 64.0 * std::log(2048.0 / kTwoPi) / std::log(10000.0);
  EXPECT_EQ(demo.llama3_high_freq_wavelen, 512.0);
  EXPECT_EQ(demo.llama3_low_freq_wavelen, 2048.0);
  EXPECT_NEAR(demo.llama3_kept_below, kept_below, 1e-12);
  EXPECT_NEAR(demo.llama3_interpolated_above, interp_above, 1e-12);
  // both thresholds are far from an integer (float32 wavelengths cannot move a pair across): 30.58, 40.21
  EXPECT_GT(std::fabs(kept_below - std::round(kept_below)), 0.1);
  EXPECT_GT(std::fabs(interp_above - std::round(interp_above)), 0.1);
  const int64_t last_kept = static_cast<int64_t>(std::ceil(kept_below)) - 1;        // 30
  const int64_t first_interp = static_cast<int64_t>(std::floor(interp_above)) + 1;  // 41
  ASSERT_EQ(demo.llama3_runs.size(), 3u);
  EXPECT_EQ(demo.llama3_runs[0].regime, PairRegime::kKept);
  EXPECT_EQ(demo.llama3_runs[0].last, last_kept);
  EXPECT_EQ(demo.llama3_runs[1].regime, PairRegime::kBlended);
  EXPECT_EQ(demo.llama3_runs[1].first, last_kept + 1);
  EXPECT_EQ(demo.llama3_runs[1].last, first_interp - 1);
  EXPECT_EQ(demo.llama3_runs[2].regime, PairRegime::kInterpolated);
  EXPECT_EQ(demo.llama3_runs[2].first, first_interp);
  EXPECT_EQ(demo.llama3_runs[2].last, 63);
  EXPECT_EQ(last_kept, 30);
  EXPECT_EQ(first_interp, 41);
  const ExtensionMethod& l3 = Find(demo, "Llama-3");
  for (int64_t i = 0; i <= last_kept; ++i) {
    EXPECT_EQ(l3.wavelength[static_cast<size_t>(i)], Find(demo, "original").wavelength[static_cast<size_t>(i)]);
  }
  for (int64_t i = first_interp; i < 64; ++i) {
    EXPECT_EQ(l3.wavelength[static_cast<size_t>(i)], Find(demo, "PI").wavelength[static_cast<size_t>(i)]);
  }
  // blended pairs lie between the two
  for (int64_t i = last_kept + 1; i < first_interp; ++i) {
    const size_t k = static_cast<size_t>(i);
    EXPECT_GT(l3.wavelength[k], Find(demo, "original").wavelength[k]);
    EXPECT_LT(l3.wavelength[k], Find(demo, "PI").wavelength[k]);
  }
}

}  // namespace
}  // namespace posenc::demo
