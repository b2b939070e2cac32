// Student-t quantiles against closed forms (1 and 2 degrees of freedom), the normal limit and a numerical
// integral of the t density; the standard error, CI and paired difference against a direct computation.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/eval/uncertainty.h"

namespace posenc {
namespace {

// P(0 <= T <= x) by composite Simpson's rule on the t density (Abramowitz & Stegun 26.7.1), 20000 panels.
double TMassFromZero(double x, double nu) {
  const double c = std::exp(std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2)) / std::sqrt(nu * std::numbers::pi);
  auto pdf = [&](double t) { return c * std::pow(1 + t * t / nu, -(nu + 1) / 2); };
  const int n = 20000;
  const double h = x / n;
  double s = pdf(0) + pdf(x);
  for (int i = 1; i < n; ++i) s += (i % 2 ? 4 : 2) * pdf(i * h);
  return s * h / 3;
}

TEST(UncertaintyTest, TQuantileClosedForms) {
  for (double q : {0.6, 0.9, 0.975, 0.995}) {
    // nu = 1 is the Cauchy distribution: x = tan(pi (q - 1/2)).
    EXPECT_NEAR(StudentTQuantile(q, 1), std::tan(std::numbers::pi * (q - 0.5)), 1e-9 * StudentTQuantile(q, 1));
    // nu = 2: x = (2q - 1) / sqrt(2 q (1 - q)).
    EXPECT_NEAR(StudentTQuantile(q, 2), (2 * q - 1) / std::sqrt(2 * q * (1 - q)), 1e-11);
    EXPECT_DOUBLE_EQ(StudentTQuantile(1 - q, 5), -StudentTQuantile(q, 5));
  }
  // Large nu: the normal quantile Phi^-1(0.975) = 1.959963984540054 plus (z^3 + z) / (4 nu) (A&S 26.7.5), on both
  // sides of the switch to the expansion at 1e6.
  const double z = 1.959963984540054;
  for (double nu : {2e5, 1e6, 1.5e6, 1e9}) {
    EXPECT_NEAR(StudentTQuantile(0.975, nu), z + (z * z * z + z) / (4 * nu), 1e-9 + 30.0 / (nu * nu)) << nu;
  }
  EXPECT_EQ(StudentTQuantile(0.5, 3), 0.0);
}

TEST(UncertaintyTest, TQuantileMatchesTheIntegratedDensity) {
  for (double nu : {3.0, 7.0, 15.0, 63.0, 1023.0}) {
    const double x = StudentTQuantile(0.975, nu);
    EXPECT_NEAR(TMassFromZero(x, nu), 0.475, 1e-10) << "nu " << nu;
  }
  // Decreasing in nu towards the normal quantile.
  EXPECT_GT(StudentTQuantile(0.975, 15), StudentTQuantile(0.975, 16));
  EXPECT_GT(StudentTQuantile(0.975, 1000), 1.959963984540054);
}

TEST(UncertaintyTest, TQuantileRejectsBadArguments) {
  EXPECT_THROW(StudentTQuantile(0.0, 3), ConfigError);
  EXPECT_THROW(StudentTQuantile(1.0, 3), ConfigError);
  EXPECT_THROW(StudentTQuantile(std::nan(""), 3), ConfigError);
  EXPECT_THROW(StudentTQuantile(0.9, 0), ConfigError);
  EXPECT_THROW(StudentTQuantile(0.9, INFINITY), ConfigError);
}

TEST(UncertaintyTest, MeanEstimateEqualsDirectComputation) {
  const std::vector<double> v = {2.5, 3.0, 2.0, 4.5, 3.25, 2.75};
  double mean = 0;
  for (double x : v) mean += x;
  mean /= 6;
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  const double se = std::sqrt(ss / 5) / std::sqrt(6.0);
  const MeanEstimate e = EstimateMean(v);
  EXPECT_EQ(e.n, 6);
  EXPECT_NEAR(e.mean, mean, 1e-15);
  EXPECT_NEAR(e.se, se, 1e-15);
  EXPECT_NEAR(e.ci95[0], mean - StudentTQuantile(0.975, 5) * se, 1e-14);
  EXPECT_NEAR(e.ci95[1], mean + StudentTQuantile(0.975, 5) * se, 1e-14);
  // t(0.975, 5) = 2.570582 in every printed table (6 decimals).
  EXPECT_NEAR(e.t975, 2.570582, 5e-7);
  // An explicit centre moves the interval, not the SE.
  const MeanEstimate c = EstimateMean(v, 1.0);
  EXPECT_EQ(c.mean, 1.0);
  EXPECT_EQ(c.se, e.se);
  EXPECT_NEAR(c.ci95[1] - c.ci95[0], e.ci95[1] - e.ci95[0], 1e-14);
}

TEST(UncertaintyTest, OneUnitHasNoSpread) {
  const MeanEstimate e = EstimateMean(std::vector<double>{1.5});
  EXPECT_EQ(e.n, 1);
  EXPECT_EQ(e.mean, 1.5);
  EXPECT_TRUE(std::isnan(e.se));
  EXPECT_TRUE(std::isnan(e.ci95[0]));
  EXPECT_THROW(EstimateMean(std::vector<double>{}), ConfigError);
  EXPECT_THROW(EstimateMean(std::vector<double>{1.0, NAN}), ConfigError);
}

TEST(UncertaintyTest, PairedDifferenceIsTheMeanOfPerUnitDifferences) {
  const std::vector<double> base = {3.0, 3.5, 2.5, 4.0};
  const std::vector<double> shifted = {2.9, 3.38, 2.41, 3.93};  // about 0.1 lower on every unit
  const PairedDifference p = EstimatePairedDifference(shifted, base);
  const std::vector<double> d = {-0.1, -0.12, -0.09, -0.07};
  const MeanEstimate e = EstimateMean(d);
  EXPECT_NEAR(p.diff.mean, e.mean, 1e-14);
  EXPECT_NEAR(p.diff.se, e.se, 1e-14);
  EXPECT_NEAR(p.t, e.mean / e.se, 1e-9);
  EXPECT_TRUE(p.real);  // consistent shift, small spread: the interval excludes 0
  const std::vector<double> noisy = {3.2, 3.3, 2.7, 3.8};
  const PairedDifference q = EstimatePairedDifference(noisy, base);
  EXPECT_FALSE(q.real);  // +0.2, -0.2, +0.2, -0.2 around 0
  EXPECT_THROW(EstimatePairedDifference(noisy, std::vector<double>{1.0}), ShapeError);
}

}  // namespace
}  // namespace posenc
