// SwiGLU: float64 gradients against finite differences, float32 against float64, large arguments.
#include "posenc/model/layers/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using testing::CheckGradient;
using testing::Pointers;
using testing::Uniform;

TEST(SwiGluTest, GradientsMatchFiniteDifferences) {
  const int64_t n = 4, hidden = 6;
  std::vector<double> gu = Uniform(n * 2 * hidden, 1, 3.0), wy = Uniform(n * hidden, 2);
  auto loss = [&] {
    std::vector<double> h(n * hidden);
    SwiGluForward<double>(gu.data(), n, hidden, h.data());
    double s = 0;
    for (size_t i = 0; i < h.size(); ++i) s += wy[i] * h[i];
    return s;
  };
  std::vector<double> d(gu.size(), 0.0);
  SwiGluBackward<double>(wy.data(), gu.data(), n, hidden, d.data());
  EXPECT_EQ(CheckGradient("dgate_up", loss, Pointers(gu), d, 3), "");
}

// float32 (ExpF32, 2 ulp) against float64. With s = sigmoid(a): the exp 2 ulp, 1 + e 1u, the reciprocal 1u give
// s within 4u relative (|e/(1+e)| <= 1 scales the exp's error); h = a s b adds 2u: |err| <= 6u |h|. The backward
// terms (s (1 + a (1 - s)) and a s) add at most 8u relative to each product of magnitudes (1 - s carries s's
// absolute error). ExpF32 clamps its argument at 87.34 (exp_kernel.h), so for a < -87.34 s is 2^-126 instead of
// e^a: an absolute error <= 2^-126 in s, times |a b| in h and |dh b| (1 + |a|) or |dh a| in the gradients.
TEST(SwiGluTest, Float32MatchesFloat64IncludingLargeArguments) {
  const int64_t n = 3, hidden = 100;
  std::vector<double> src = Uniform(n * 2 * hidden, 4, 12.0);
  src[0] = 90.0, src[1] = -90.0, src[2] = 200.0, src[3] = -200.0;  // past ExpF32's clamp
  const std::vector<double> dh = Uniform(n * hidden, 5);
  std::vector<float> gu(src.begin(), src.end()), dhf(dh.begin(), dh.end()), h(n * hidden), d(gu.size(), 0.0f);
  SwiGluForward<float>(gu.data(), n, hidden, h.data());
  SwiGluBackward<float>(dhf.data(), gu.data(), n, hidden, d.data());
  constexpr double u = 0x1p-24;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < hidden; ++c) {
      const double a = gu[r * 2 * hidden + c], b = gu[r * 2 * hidden + hidden + c], g = dhf[r * hidden + c];
      const double s = 1.0 / (1.0 + std::exp(-a));
      ASSERT_TRUE(std::isfinite(h[r * hidden + c]));
      const double clamp = 0x1p-126;  // ExpF32's floor for e^-a, a < -87.34
      ASSERT_LE(std::fabs(h[r * hidden + c] - a * s * b), 6 * u * std::fabs(a * s * b) + clamp * std::fabs(a * b))
          << r << "," << c;
      const double dg = g * b * s * (1 + a * (1 - s)), dg_mag = std::fabs(g * b) * s * (1 + std::fabs(a) * (1 - s) + std::fabs(a) * s);
      ASSERT_LE(std::fabs(d[r * 2 * hidden + c] - dg), 8 * u * dg_mag + clamp * std::fabs(g * b) * (1 + std::fabs(a)))
          << r << "," << c;
      ASSERT_LE(std::fabs(d[r * 2 * hidden + hidden + c] - g * a * s), 8 * u * std::fabs(g * a * s) + clamp * std::fabs(g * a));
    }
  }
}

TEST(SwiGluTest, BadInput) {
  std::vector<float> x(4), h(2);
  EXPECT_THROW(SwiGluForward<float>(x.data(), 1, 0, h.data()), ShapeError);
  EXPECT_THROW(SwiGluForward<float>(nullptr, 1, 2, h.data()), ShapeError);
  EXPECT_THROW(SwiGluBackward<float>(h.data(), x.data(), 1, 2, nullptr), ShapeError);
}

}  // namespace
}  // namespace posenc
