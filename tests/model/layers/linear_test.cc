// The linear layer: float64 gradients against finite differences (tests/grad_check.h), float32 against float64,
// accumulation, thread-count independence and bad input.
#include "posenc/model/layers/linear.h"

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

// L = sum(wy * y) for y = x W^T + b, so dL/dy = wy.
TEST(LinearTest, GradientsMatchFiniteDifferences) {
  const int64_t n = 7, in = 5, out = 3;
  std::vector<double> x = Uniform(n * in, 1), w = Uniform(out * in, 2), b = Uniform(out, 3), wy = Uniform(n * out, 4);
  auto loss = [&] {
    std::vector<double> y(n * out);
    LinearForward<double>(x.data(), w.data(), b.data(), n, in, out, y.data());
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += wy[i] * y[i];
    return s;
  };
  std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0), db(b.size(), 0.0);
  LinearBackward<double>(wy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data(), db.data());
  EXPECT_EQ(CheckGradient("dx", loss, Pointers(x), dx, 10), "");
  EXPECT_EQ(CheckGradient("dw", loss, Pointers(w), dw, 11), "");
  EXPECT_EQ(CheckGradient("db", loss, Pointers(b), db, 12), "");
}

// The backward adds to what the outputs hold; kAccumulate adds the product to y.
TEST(LinearTest, BackwardAccumulatesAndForwardCanAccumulate) {
  const int64_t n = 4, in = 3, out = 2;
  std::vector<double> x = Uniform(n * in, 5), w = Uniform(out * in, 6), dy = Uniform(n * out, 7);
  std::vector<double> dx0(x.size(), 0.0), dw0(w.size(), 0.0), db0(out, 0.0);
  LinearBackward<double>(dy.data(), x.data(), w.data(), n, in, out, dx0.data(), dw0.data(), db0.data());
  std::vector<double> dx = dx0, dw = dw0, db = db0;
  LinearBackward<double>(dy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data(), db.data());
  for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], 2 * dx0[i], 1e-14);
  for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], 2 * dw0[i], 1e-14);
  for (size_t i = 0; i < db.size(); ++i) EXPECT_NEAR(db[i], 2 * db0[i], 1e-14);
  std::vector<double> y(n * out, 0.0), y2(n * out, 1.0);
  LinearForward<double>(x.data(), w.data(), nullptr, n, in, out, y.data());
  LinearForward<double>(x.data(), w.data(), nullptr, n, in, out, y2.data(), OutputMode::kAccumulate);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y2[i], y[i] + 1.0, 1e-14);
}

// float32 products (sgemm) against the float64 ones: |err| <= (k + 2) u sum|terms| per element (k summands, u =
// 2^-24; the bias add and the accumulation into an initial value add one rounding each).
TEST(LinearTest, Float32MatchesFloat64WithinTheSumBound) {
  const int64_t n = 300, in = 64, out = 172;  // rows split over threads
  const std::vector<double> xd = Uniform(n * in, 8), wd = Uniform(out * in, 9), bd = Uniform(out, 10);
  const std::vector<double> dyd = Uniform(n * out, 11);
  std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), b(bd.begin(), bd.end()),
      dy(dyd.begin(), dyd.end());
  std::vector<float> y(n * out), dx(n * in, 0.0f), dw(out * in, 0.0f), db(out, 0.0f);
  LinearForward<float>(x.data(), w.data(), b.data(), n, in, out, y.data());
  LinearBackward<float>(dy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data(), db.data());
  constexpr double u = 0x1p-24;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      double ref = b[o], mag = std::fabs(b[o]);
      for (int64_t i = 0; i < in; ++i) ref += double(x[r * in + i]) * w[o * in + i], mag += std::fabs(double(x[r * in + i]) * w[o * in + i]);
      ASSERT_LE(std::fabs(y[r * out + o] - ref), (in + 2) * u * mag) << r << "," << o;
    }
  }
  for (int64_t o = 0; o < out; ++o) {
    for (int64_t i = 0; i < in; ++i) {
      double ref = 0, mag = 0;
      for (int64_t r = 0; r < n; ++r) ref += double(dy[r * out + o]) * x[r * in + i], mag += std::fabs(double(dy[r * out + o]) * x[r * in + i]);
      ASSERT_LE(std::fabs(dw[o * in + i] - ref), (n + 2) * u * mag) << o << "," << i;
    }
    double ref = 0, mag = 0;
    for (int64_t r = 0; r < n; ++r) ref += dy[r * out + o], mag += std::fabs(dy[r * out + o]);
    ASSERT_LE(std::fabs(db[o] - ref), u * mag) << "db " << o;  // float64 sum, one rounding
  }
}

TEST(LinearTest, ResultsDoNotDependOnTheThreadCount) {
  const int64_t n = 1000, in = 64, out = 128;
  std::vector<float> x(n * in), w(out * in), b(out), dy(n * out);
  const std::vector<double> src = Uniform(x.size() + w.size() + b.size() + dy.size(), 12);
  size_t k = 0;
  for (auto* v : {&x, &w, &b, &dy}) {
    for (float& e : *v) e = static_cast<float>(src[k++]);
  }
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    std::vector<float> y(n * out), dx(n * in, 0.0f), dw(out * in, 0.0f), db(out, 0.0f);
    LinearForward<float>(x.data(), w.data(), b.data(), n, in, out, y.data());
    LinearBackward<float>(dy.data(), x.data(), w.data(), n, in, out, dx.data(), dw.data(), db.data());
    omp_set_num_threads(saved);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    y.insert(y.end(), db.begin(), db.end());
    return y;
  };
  const std::vector<float> one = run(1), two = run(2), three = run(3);
  EXPECT_TRUE(one == two);
  EXPECT_TRUE(one == three);
}

TEST(LinearTest, BadInputIsAShapeError) {
  std::vector<float> x(6), w(6), y(4);
  EXPECT_THROW(LinearForward<float>(x.data(), w.data(), nullptr, -1, 3, 2, y.data()), ShapeError);
  EXPECT_THROW(LinearForward<float>(nullptr, w.data(), nullptr, 2, 3, 2, y.data()), ShapeError);
  EXPECT_THROW(LinearBackward<float>(y.data(), x.data(), w.data(), 2, 3, 2, nullptr, nullptr, nullptr), ShapeError);
  LinearForward<float>(nullptr, nullptr, nullptr, 0, 3, 2, nullptr);  // nothing to do: no error
}

}  // namespace
}  // namespace posenc
