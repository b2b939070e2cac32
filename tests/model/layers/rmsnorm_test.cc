// RMSNorm: float64 gradients against finite differences, float32 against float64, the forward against its
// definition, thread-count independence and bad input.
#include "posenc/model/layers/rmsnorm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using testing::CheckGradient;
using testing::Pointers;
using testing::Uniform;

TEST(RmsNormTest, GradientsMatchFiniteDifferences) {
  const int64_t n = 5, dim = 7;
  const double eps = 1e-5;
  std::vector<double> x = Uniform(n * dim, 1), w = Uniform(dim, 2), wy = Uniform(n * dim, 3);
  for (double& v : w) v += 1.0;
  auto loss = [&] {
    std::vector<double> y(n * dim), rstd(n);
    RmsNormForward<double>(x.data(), w.data(), n, dim, eps, y.data(), rstd.data());
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += wy[i] * y[i];
    return s;
  };
  std::vector<double> y(n * dim), rstd(n), dx(x.size(), 0.0), dw(w.size(), 0.0);
  RmsNormForward<double>(x.data(), w.data(), n, dim, eps, y.data(), rstd.data());
  RmsNormBackward<double>(wy.data(), x.data(), w.data(), rstd.data(), n, dim, dx.data(), dw.data());
  EXPECT_EQ(CheckGradient("dx", loss, Pointers(x), dx, 4), "");
  EXPECT_EQ(CheckGradient("dw", loss, Pointers(w), dw, 5), "");
}

// Forward: y = w x / sqrt(mean x^2 + eps) in float32 vs float64: the mean square sums dim terms ((dim + 2) u
// relative), the square root and reciprocal 2u, the two products 2u: |err| <= ((dim + 2) / 2 + 5) u |y|.
// Backward in float32 vs float64: dx sums dim products twice (mean(g xhat) in float64): <= (dim + 12) u
// (|g w| + |xhat| |mean|) rstd per element; dw sums n rows in float64: <= 6 u sum |dy xhat|.
TEST(RmsNormTest, Float32MatchesFloat64) {
  const int64_t n = 600, dim = 64;  // rows split over threads, several reduction blocks
  const double eps = 1e-5;
  const std::vector<double> xd = Uniform(n * dim, 6, 3.0), wd = Uniform(dim, 7), dyd = Uniform(n * dim, 8);
  std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), dy(dyd.begin(), dyd.end());
  std::vector<float> y(n * dim), rstd(n), dx(n * dim, 0.0f), dw(dim, 0.0f);
  RmsNormForward<float>(x.data(), w.data(), n, dim, eps, y.data(), rstd.data());
  RmsNormBackward<float>(dy.data(), x.data(), w.data(), rstd.data(), n, dim, dx.data(), dw.data());
  constexpr double u = 0x1p-24;
  std::vector<double> dw_ref(dim, 0.0), dw_mag(dim, 0.0);
  for (int64_t r = 0; r < n; ++r) {
    double ms = 0;
    for (int64_t c = 0; c < dim; ++c) ms += double(x[r * dim + c]) * x[r * dim + c];
    const double s = 1.0 / std::sqrt(ms / dim + eps);
    double m = 0, m_mag = 0;
    for (int64_t c = 0; c < dim; ++c) {
      const double xh = x[r * dim + c] * s, g = double(dy[r * dim + c]) * w[c];
      m += g * xh / dim;
      m_mag += std::fabs(g * xh) / dim;
      const double yref = w[c] * xh;
      ASSERT_LE(std::fabs(y[r * dim + c] - yref), ((dim + 2) / 2.0 + 5) * u * std::fabs(yref)) << r << "," << c;
      dw_ref[c] += dy[r * dim + c] * xh;
      dw_mag[c] += std::fabs(dy[r * dim + c] * xh);
    }
    for (int64_t c = 0; c < dim; ++c) {
      const double xh = x[r * dim + c] * s, g = double(dy[r * dim + c]) * w[c];
      const double ref = s * (g - xh * m);
      ASSERT_LE(std::fabs(dx[r * dim + c] - ref), (dim + 12) * u * s * (std::fabs(g) + std::fabs(xh) * m_mag))
          << r << "," << c;
    }
  }
  for (int64_t c = 0; c < dim; ++c) EXPECT_LE(std::fabs(dw[c] - dw_ref[c]), 6 * u * dw_mag[c]) << c;
}

TEST(RmsNormTest, ResultsDoNotDependOnTheThreadCount) {
  const int64_t n = 1500, dim = 64;
  const std::vector<double> src = Uniform(2 * n * dim + dim, 9);
  std::vector<float> x(src.begin(), src.begin() + n * dim), dy(src.begin() + n * dim, src.begin() + 2 * n * dim),
      w(src.begin() + 2 * n * dim, src.end());
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> y(n * dim), rstd(n), dx(n * dim, 0.0f), dw(dim, 0.0f);
    RmsNormForward<float>(x.data(), w.data(), n, dim, 1e-5, y.data(), rstd.data());
    RmsNormBackward<float>(dy.data(), x.data(), w.data(), rstd.data(), n, dim, dx.data(), dw.data());
    omp_set_num_threads(saved);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  EXPECT_TRUE(run(1) == run(2));
  EXPECT_TRUE(run(1) == run(3));
}

TEST(RmsNormTest, BadInput) {
  std::vector<float> x(4), w(2), y(4), r(2);
  EXPECT_THROW(RmsNormForward<float>(x.data(), w.data(), 2, 2, -1.0, y.data(), r.data()), ConfigError);
  EXPECT_THROW(RmsNormForward<float>(x.data(), w.data(), 2, 2, NAN, y.data(), r.data()), ConfigError);
  EXPECT_THROW(RmsNormForward<float>(x.data(), w.data(), 2, 0, 1e-5, y.data(), r.data()), ShapeError);
  EXPECT_THROW(RmsNormForward<float>(x.data(), nullptr, 2, 2, 1e-5, y.data(), r.data()), ShapeError);
}

}  // namespace
}  // namespace posenc
