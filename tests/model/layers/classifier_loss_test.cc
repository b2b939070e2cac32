// Classifier + cross-entropy: the loss against log-softmax written out in float64 (ignored targets included),
// float64 gradients against finite differences, float32 against float64, large logits, bad targets.
#include "posenc/model/layers/classifier_loss.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using testing::Uniform;

// Mean over rows with a target of log sum_v exp(l_v) - l_target, written directly (float64, max-subtracted).
double ReferenceLoss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<int32_t>& targets,
                     int64_t dim, int64_t V) {
  double total = 0;
  int count = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    if (targets[r] < 0) continue;
    std::vector<double> l(V);
    double m = -INFINITY;
    for (int64_t v = 0; v < V; ++v) {
      for (int64_t c = 0; c < dim; ++c) l[v] += x[r * dim + c] * w[v * dim + c];
      m = std::max(m, l[v]);
    }
    double s = 0;
    for (double e : l) s += std::exp(e - m);
    total += m + std::log(s) - l[targets[r]];
    ++count;
  }
  return total / count;
}

TEST(ClassifierLossTest, LossAndGradientsInFloat64) {
  const int64_t dim = 6, V = 11;
  const std::vector<int32_t> targets = {3, -1, 10, 0, 3, -1, 7};
  const int64_t n = static_cast<int64_t>(targets.size());
  std::vector<double> x = Uniform(n * dim, 1, 2.0), w = Uniform(V * dim, 2, 2.0);
  std::vector<double> logits(n * V), lse(n);
  auto loss = [&] { return ClassifierLossForward<double>(x.data(), w.data(), targets, dim, V, logits.data(), lse.data()); };
  EXPECT_NEAR(loss(), ReferenceLoss(x, w, targets, dim, V), 1e-14);
  std::vector<double> dx(x.size(), 0.0), dw(w.size(), 0.0);
  loss();
  ClassifierLossBackward<double>(x.data(), w.data(), targets, dim, V, lse.data(), 1.0, logits.data(), dx.data(), dw.data());
  for (int64_t v = 0; v < V; ++v) EXPECT_EQ(logits[1 * V + v], 0.0) << "ignored row gets no gradient";
  EXPECT_EQ(testing::CheckGradient("dx", loss, testing::Pointers(x), dx, 3), "");
  EXPECT_EQ(testing::CheckGradient("dw", loss, testing::Pointers(w), dw, 4), "");
}

// float32 against float64 with logits up to +-60 (no overflow: the row maximum is subtracted). The float32 logits
// carry (dim + 1) u sum|x w|; the loss adds the exp (2 ulp) and the float64 sum and log: |err| <= 2 (dim + 1) u M + 4u
// (1 + |lse|) with M = max_v sum_c |x w| (the same M bounds both logits in the difference lse - logit).
TEST(ClassifierLossTest, Float32MatchesFloat64AtLargeLogits) {
  const int64_t dim = 16, V = 512, n = 40;
  std::vector<int32_t> targets(n);
  for (int64_t r = 0; r < n; ++r) targets[r] = static_cast<int32_t>((r * 37) % V);
  const std::vector<double> xd = Uniform(n * dim, 5, 3.0), wd = Uniform(V * dim, 6, 2.0);
  std::vector<float> x(xd.begin(), xd.end()), w(wd.begin(), wd.end()), logits(n * V), lse(n);
  std::vector<double> x64(x.begin(), x.end()), w64(w.begin(), w.end()), l64(n * V), lse64(n);
  const double loss32 = ClassifierLossForward<float>(x.data(), w.data(), targets, dim, V, logits.data(), lse.data());
  const double loss64 = ClassifierLossForward<double>(x64.data(), w64.data(), targets, dim, V, l64.data(), lse64.data());
  double M = 0, big = 0;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t v = 0; v < V; ++v) {
      double m = 0;
      for (int64_t c = 0; c < dim; ++c) m += std::fabs(x64[r * dim + c] * w64[v * dim + c]);
      M = std::max(M, m);
      big = std::max(big, std::fabs(l64[r * V + v]));
    }
  }
  ASSERT_GT(big, 20.0);  // the case does exercise large logits
  constexpr double u = 0x1p-24;
  EXPECT_LE(std::fabs(loss32 - loss64), 2 * (dim + 1) * u * M + 4 * u * (1 + big));
  // gradients: dlogits = softmax - onehot within (2 (dim + 1) M + 8) u relative per softmax entry, then the products
  std::vector<float> dx(n * dim, 0.0f), dw(V * dim, 0.0f);
  std::vector<double> dx64(n * dim, 0.0), dw64(V * dim, 0.0);
  ClassifierLossBackward<float>(x.data(), w.data(), targets, dim, V, lse.data(), 1.0, logits.data(), dx.data(), dw.data());
  ClassifierLossBackward<double>(x64.data(), w64.data(), targets, dim, V, lse64.data(), 1.0, l64.data(), dx64.data(), dw64.data());
  const double rel = (2 * (dim + 1) * M + 8 + V + n) * u;
  double err = 0, norm = 0;
  for (size_t i = 0; i < dx.size(); ++i) err = std::max(err, std::fabs(dx[i] - dx64[i])), norm = std::max(norm, std::fabs(dx64[i]));
  EXPECT_LE(err, rel * norm * 2) << "dx";
  err = 0, norm = 0;
  for (size_t i = 0; i < dw.size(); ++i) err = std::max(err, std::fabs(dw[i] - dw64[i])), norm = std::max(norm, std::fabs(dw64[i]));
  EXPECT_LE(err, rel * norm * 2) << "dw";
}

TEST(ClassifierLossTest, BadTargets) {
  std::vector<float> x(4), w(6), logits(6), lse(2);
  const std::vector<int32_t> out_of_range = {0, 3}, all_ignored = {-1, -1}, negative = {-2, 0};
  EXPECT_THROW(ClassifierLossForward<float>(x.data(), w.data(), out_of_range, 2, 3, logits.data(), lse.data()), RangeError);
  EXPECT_THROW(ClassifierLossForward<float>(x.data(), w.data(), negative, 2, 3, logits.data(), lse.data()), RangeError);
  try {
    ClassifierLossForward<float>(x.data(), w.data(), all_ignored, 2, 3, logits.data(), lse.data());
    FAIL() << "no error";
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("all -1"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> ok = {0, 1};
  std::vector<float> dx(4), dw(6);
  EXPECT_THROW(ClassifierLossBackward<float>(x.data(), w.data(), ok, 2, 3, lse.data(), NAN, logits.data(), dx.data(), dw.data()),
               ConfigError);
}

}  // namespace
}  // namespace posenc
