#include "posenc/eval/uncertainty.h"

#include <cmath>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Continued fraction of the regularized incomplete beta (DLMF 8.17.22), modified Lentz; converges fast for
// x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double a, double b, double x) {
  constexpr double kTiny = 1e-300;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double h = d;
  for (int m = 1; m <= 10000; ++m) {
    const double m2 = 2.0 * m;
    double num = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    h *= d * c;
    num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + num * d;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = 1.0 + num / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return h;
}

// I_x(a, b), the regularized incomplete beta function, for x in [0, 1].
double RegularizedIncompleteBeta(double a, double b, double x) {
  if (x <= 0.0) return 0.0;
  if (x >= 1.0) return 1.0;
  const double log_front =
      std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
  if (x < (a + 1.0) / (a + b + 2.0)) return std::exp(log_front) * BetaContinuedFraction(a, b, x) / a;
  return 1.0 - std::exp(log_front) * BetaContinuedFraction(b, a, 1.0 - x) / b;
}

// P(T > x) for x >= 0.
double StudentTUpperTail(double x, double dof) {
  return 0.5 * RegularizedIncompleteBeta(dof / 2.0, 0.5, dof / (dof + x * x));
}

// P(Z > x) of the standard normal.
double NormalUpperTail(double x, double) { return 0.5 * std::erfc(x / std::sqrt(2.0)); }

// The x >= 0 with upper_tail(x) = tail, by bisection to one ulp.
double InvertUpperTail(double tail, double dof, double (*upper_tail)(double, double)) {
  double lo = 0.0, hi = 1.0;
  while (upper_tail(hi, dof) > tail) {
    lo = hi;
    hi *= 2.0;
    if (!std::isfinite(hi)) return std::numeric_limits<double>::infinity();
  }
  for (int i = 0; i < 2000; ++i) {
    const double mid = 0.5 * (lo + hi);
    if (mid <= lo || mid >= hi) break;
    (upper_tail(mid, dof) > tail ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Above this many degrees of freedom lgamma's cancellation in the incomplete beta's prefactor (lgamma(dof/2) is
// ~dof ln dof) costs more than the Cornish-Fisher expansion's first omitted term, O(dof^-3) < 1e-20.
constexpr double kLargeDof = 1e6;

}  // namespace

double StudentTQuantile(double q, double dof) {
  if (!(q > 0.0 && q < 1.0)) throw ConfigError(fmt::format("t quantile: q must be in (0, 1), got {}", q));
  if (!(std::isfinite(dof) && dof > 0.0)) {
    throw ConfigError(fmt::format("t quantile: degrees of freedom must be finite and > 0, got {}", dof));
  }
  if (q == 0.5) return 0.0;
  if (q < 0.5) return -StudentTQuantile(1.0 - q, dof);
  const double tail = 1.0 - q;  // wanted P(T > x)
  if (dof <= kLargeDof) return InvertUpperTail(tail, dof, StudentTUpperTail);
  // Cornish-Fisher expansion of the t quantile about the normal one (Abramowitz & Stegun 26.7.5).
  const double z = InvertUpperTail(tail, dof, NormalUpperTail);
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4.0 * dof) + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * dof * dof);
}

MeanEstimate EstimateMean(std::span<const double> values) {
  if (values.empty()) throw ConfigError("mean estimate: no units to average");
  double sum = 0.0;
  for (double v : values) sum += v;
  return EstimateMean(values, sum / static_cast<double>(values.size()));
}

MeanEstimate EstimateMean(std::span<const double> values, double centre) {
  if (values.empty()) throw ConfigError("mean estimate: no units to average");
  const int64_t n = static_cast<int64_t>(values.size());
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = values[static_cast<size_t>(i)];
    if (!std::isfinite(v)) throw ConfigError(fmt::format("mean estimate: unit {} is {}", i, v));
    sum += v;
  }
  const double mean = sum / static_cast<double>(n);
  MeanEstimate e;
  e.n = n;
  e.mean = centre;
  if (n < 2) {
    e.se = e.t975 = kNaN;
    e.ci95 = {kNaN, kNaN};
    return e;
  }
  double ss = 0.0;
  for (double v : values) ss += (v - mean) * (v - mean);
  e.se = std::sqrt(ss / static_cast<double>(n - 1)) / std::sqrt(static_cast<double>(n));
  e.t975 = StudentTQuantile(0.975, static_cast<double>(n - 1));
  e.ci95 = {centre - e.t975 * e.se, centre + e.t975 * e.se};
  return e;
}

namespace {

// d_i = method_i - base_i. Errors: ShapeError if the lengths differ.
std::vector<double> Differences(std::span<const double> method, std::span<const double> base) {
  if (method.size() != base.size()) {
    throw ShapeError(fmt::format("paired difference: {} units against {} units of the base", method.size(),
                                 base.size()));
  }
  std::vector<double> d(method.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = method[i] - base[i];
  return d;
}

PairedDifference FromDifferences(std::span<const double> d, double centre) {
  PairedDifference p;
  p.diff = EstimateMean(d, centre);
  p.t = p.diff.se > 0.0 ? p.diff.mean / p.diff.se : kNaN;
  p.real = std::isfinite(p.diff.ci95[0]) && (p.diff.ci95[0] > 0.0 || p.diff.ci95[1] < 0.0);
  return p;
}

}  // namespace

PairedDifference EstimatePairedDifference(std::span<const double> method, std::span<const double> base) {
  const std::vector<double> d = Differences(method, base);
  return FromDifferences(d, EstimateMean(d).mean);
}

PairedDifference EstimatePairedDifference(std::span<const double> method, std::span<const double> base,
                                          double centre) {
  return FromDifferences(Differences(method, base), centre);
}

}  // namespace posenc
