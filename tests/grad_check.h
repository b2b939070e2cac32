// Gradient checks against central finite differences in float64 (shared by the layer and training-model tests).
//
// For a function f: R^n -> R evaluated in float64 and its analytic gradient g (computed by the code under test,
// also in float64), each check compares the directional derivative g . u with the 4-point central difference
//   D(h) = [8 (f(x + h u) - f(x - h u)) - (f(x + 2h u) - f(x - 2h u))] / (12 h),   |u| = 1,
// along u = g / |g| (every error that changes the gradient's length or direction shows) and along a random unit
// vector (a gradient that misses a component shows).
//
// Bound. D(h) - f'(0) = -h^4 f^(5)(xi) / 30 (truncation) + at most 1.5 delta / h (rounding: delta bounds the float64
// error of one evaluation of f; the stencil's weights sum to 18 / 12). delta <= n u sum|terms| with u = 2^-53, n the
// longest accumulation in these tiny shapes (< 2^10) and sum|terms| < 2^4 max(1, |f|): delta = 2^-39 max(1, |f|).
// The truncation term has no a-priori bound (f^(5) is unknown), so it is estimated: D(h/2)'s truncation is 1/16 of
// D(h)'s, hence |D(h) - D(h/2)| >= (15/16) |trunc(h)| >= 15 |trunc(h/2)|, and
//   |D(h/2) - g.u| <= |D(h) - D(h/2)| + 3 delta / h + e_g,
// with e_g = 2^-30 |g| for the rounding of the analytic gradient itself (a float64 computation of the same depth:
// generous). The check fails if the difference exceeds that bound, or if the bound itself exceeds
// 1e-6 |g| + 1e-9 (a check that could not detect a relative error of 1e-6 is no check); before giving up, the step
// is divided by 4 up to three times (truncation falls as h^4, rounding grows as 1/h). Observed relative
// differences are about 1e-10.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace posenc::testing {

/// The largest relative difference |D - g.u| / (|g| + 1e-12) seen by CheckGradient calls (for reports).
inline double& MaxObservedFdError() {
  static double max_seen = 0;
  return max_seen;
}

/// Checks the analytic gradient `g` of `f` at `x` (f reads x; x is restored after each evaluation). Returns "" if
/// both directional checks pass, else a description naming `what`. h: the first step tried.
inline std::string CheckGradient(const std::string& what, const std::function<double()>& f, std::vector<double*> x,
                                 const std::vector<double>& g, uint64_t seed, double h = 0x1p-7) {
  const size_t n = x.size();
  double gnorm = 0;
  for (double v : g) gnorm += v * v;
  gnorm = std::sqrt(gnorm);
  std::vector<std::vector<double>> dirs;
  if (gnorm > 0) {
    dirs.emplace_back(n);
    for (size_t i = 0; i < n; ++i) dirs.back()[i] = g[i] / gnorm;
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd;
  dirs.emplace_back(n);
  double un = 0;
  for (double& v : dirs.back()) {
    v = nd(rng);
    un += v * v;
  }
  for (double& v : dirs.back()) v /= std::sqrt(un);

  const double f0 = f();
  const double delta = 0x1p-39 * std::max(1.0, std::fabs(f0));
  std::vector<double> saved(n);
  for (size_t i = 0; i < n; ++i) saved[i] = *x[i];
  auto at = [&](const std::vector<double>& u, double t) {
    for (size_t i = 0; i < n; ++i) *x[i] = saved[i] + t * u[i];
    const double v = f();
    for (size_t i = 0; i < n; ++i) *x[i] = saved[i];
    return v;
  };
  auto stencil = [&](const std::vector<double>& u, double step) {
    return (8.0 * (at(u, step) - at(u, -step)) - (at(u, 2 * step) - at(u, -2 * step))) / (12.0 * step);
  };
  std::ostringstream err;
  for (size_t k = 0; k < dirs.size(); ++k) {
    const std::vector<double>& u = dirs[k];
    double gu = 0;
    for (size_t i = 0; i < n; ++i) gu += g[i] * u[i];
    // The step: h, or h / 4, h / 16, h / 64 until the truncation estimate is small enough to check with.
    double step = h, d1 = 0, d2 = 0, bound = 0;
    for (int attempt = 0; attempt < 4; ++attempt, step /= 4) {
      d1 = stencil(u, step);
      d2 = stencil(u, step / 2);
      bound = std::fabs(d1 - d2) + 3.0 * delta / step + 0x1p-30 * gnorm;
      if (bound <= 1e-6 * gnorm + 1e-9) break;
    }
    const double diff = std::fabs(d2 - gu);
    MaxObservedFdError() = std::max(MaxObservedFdError(), diff / (gnorm + 1e-12));
    const char* dir = k + 1 == dirs.size() ? "random direction" : "gradient direction";
    if (!(diff <= bound)) {
      err << what << " (" << dir << "): finite difference " << d2 << " vs analytic " << gu << ", |diff| " << diff
          << " > bound " << bound << " (|g| = " << gnorm << "); ";
    } else if (!(bound <= 1e-6 * gnorm + 1e-9)) {
      err << what << " (" << dir << "): the bound " << bound << " is too loose to check (|g| = " << gnorm
          << ", D(h) = " << d1 << ", D(h/2) = " << d2 << "); ";
    }
  }
  return err.str();
}

/// Pointers to every element of v (for CheckGradient's x).
inline std::vector<double*> Pointers(std::vector<double>& v) {
  std::vector<double*> p;
  for (double& e : v) p.push_back(&e);
  return p;
}

/// n values from std::mt19937_64(seed), uniform in [-scale, scale) (test inputs; the expected values are computed
/// in the same run).
inline std::vector<double> Uniform(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> ud(-scale, scale);
  std::vector<double> v(n);
  for (double& x : v) x = ud(rng);
  return v;
}

}  // namespace posenc::testing
