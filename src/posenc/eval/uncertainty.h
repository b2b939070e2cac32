// Uncertainty of a mean NLL over independent units: standard error, Student-t confidence intervals, paired
// differences between two methods scored on the same units.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace posenc {

/// The q-quantile of Student's t distribution with `dof` degrees of freedom: the x with P(T <= x) = q.
/// Computed, not tabulated: P(T <= x) = 1 - I_{dof / (dof + x^2)}(dof / 2, 1 / 2) / 2 for x >= 0, with the
/// regularized incomplete beta I by its continued fraction (modified Lentz; DLMF 8.17.22), inverted by bisection
/// to the last bit of a double; above 1e6 degrees of freedom the Cornish-Fisher expansion about the normal
/// quantile (A&S 26.7.5, two terms; error below 1e-18). Symmetric: quantile(1 - q) = -quantile(q).
/// Errors: ConfigError if q is not in (0, 1) or dof is not finite and > 0.
/// Source: DLMF 8.17 (incomplete beta), Abramowitz & Stegun 26.7.1 (t distribution).
double StudentTQuantile(double q, double dof);

/// Mean, standard error and 95% confidence interval of a set of unit values (e.g. each window's mean NLL).
struct MeanEstimate {
  int64_t n = 0;        // units
  double mean = 0.0;    // the units' mean (or the centre given to EstimateMean)
  double se = 0.0;      // sample standard deviation (n - 1) / sqrt(n); NaN when n < 2 (no spread to measure)
  double t975 = 0.0;    // t(0.975, n - 1); NaN when n < 2
  std::array<double, 2> ci95 = {0.0, 0.0};  // centre -/+ t975 * se; [NaN, NaN] when n < 2
};

/// SE = sd(values, n - 1) / sqrt(n), CI = centre -/+ t(0.975, n - 1) * SE, sums in double. `centre` is the
/// estimate the interval is about: the values' mean by default; a protocol whose estimate is not the plain
/// mean of its units (a token-weighted mean over documents) passes its own.
/// Errors: ConfigError if values is empty or a value is not finite.
MeanEstimate EstimateMean(std::span<const double> values);
MeanEstimate EstimateMean(std::span<const double> values, double centre);

/// A paired difference method - base on the same units: d_i = method_i - base_i.
/// Errors: ShapeError if the spans differ in length; as EstimateMean. `centre` as EstimateMean (default: mean d).
struct PairedDifference {
  MeanEstimate diff;   // of d_i (in NLL, nats)
  double t = 0.0;      // diff.mean / diff.se (NaN when the SE is 0 or undefined)
  bool real = false;   // the 95% interval excludes 0
};
PairedDifference EstimatePairedDifference(std::span<const double> method, std::span<const double> base);
PairedDifference EstimatePairedDifference(std::span<const double> method, std::span<const double> base,
                                          double centre);

}  // namespace posenc
