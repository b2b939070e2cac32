// AdamW against the update rule written out in float64 (Loshchilov & Hutter 2019, Algorithm 2, with PyTorch's
// placement of eps), weight decay only on matrices and embeddings, the gradient norm and clipping (PyTorch's
// clip_grad_norm_ formula), thread-count independence and bad settings.
#include "posenc/train/optimizer.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"
#include "posenc/train/config.h"
#include "tiny_model.h"

namespace posenc {
namespace {

TrainShape Small() {
  TrainShape c;
  c.dim = 4;
  c.hidden_dim = 6;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 5;
  c.max_seq_len = 8;
  return c;
}

TEST(AdamWTest, ThreeStepsMatchTheRuleInFloat64) {
  const ParameterLayout layout(testing::ModelOf(Small()));
  AdamWConfig cfg;
  cfg.beta1 = 0.8;
  cfg.beta2 = 0.95;
  cfg.eps = 1e-6;
  cfg.weight_decay = 0.1;
  AdamW<double> opt(layout, cfg);
  std::vector<double> p = testing::Uniform(static_cast<size_t>(layout.total()), 1);
  std::vector<double> ref = p, m(p.size(), 0.0), v(p.size(), 0.0);
  const double lrs[] = {0.01, 0.02, 0.005};
  for (int t = 1; t <= 3; ++t) {
    const std::vector<double> g = testing::Uniform(p.size(), 10 + t);
    opt.Step(p, g, lrs[t - 1]);
    for (size_t i = 0; i < p.size(); ++i) {
      const bool decay = layout.At(static_cast<int64_t>(i)).decay;
      m[i] = cfg.beta1 * m[i] + (1 - cfg.beta1) * g[i];
      v[i] = cfg.beta2 * v[i] + (1 - cfg.beta2) * g[i] * g[i];
      const double mhat = m[i] / (1 - std::pow(cfg.beta1, t)), vhat = v[i] / (1 - std::pow(cfg.beta2, t));
      ref[i] = ref[i] * (decay ? 1 - lrs[t - 1] * cfg.weight_decay : 1.0) - lrs[t - 1] * mhat / (std::sqrt(vhat) + cfg.eps);
    }
  }
  EXPECT_EQ(opt.step(), 3);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(p[i], ref[i], 1e-14) << layout.At(static_cast<int64_t>(i)).name;
}

TEST(AdamWTest, NormsAndBiasesAreNotDecayed) {
  TrainShape c = Small();
  c.attention_bias = true;
  const ParameterLayout layout(testing::ModelOf(c));
  AdamWConfig cfg;
  cfg.weight_decay = 0.5;
  AdamW<float> opt(layout, cfg);
  std::vector<float> p(static_cast<size_t>(layout.total()), 1.0f), g(p.size(), 0.0f);
  opt.Step(p, g, 0.1);  // zero gradient: only the decay moves anything
  for (const ParameterTensor& t : layout.tensors()) {
    const float expect = t.shape.size() >= 2 ? 0.95f : 1.0f;
    EXPECT_EQ(p[static_cast<size_t>(t.offset)], expect) << t.name;
  }
}

TEST(AdamWTest, Float32StepDoesNotDependOnTheThreadCount) {
  TrainShape c = Stories260KConfig();
  const ParameterLayout layout(testing::ModelOf(c));
  const std::vector<double> src = testing::Uniform(static_cast<size_t>(2 * layout.total()), 3);
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    AdamW<float> opt(layout, AdamWConfig{});
    std::vector<float> p(src.begin(), src.begin() + layout.total()), g(src.begin() + layout.total(), src.end());
    opt.Step(p, g, 1e-3);
    opt.Step(p, g, 1e-3);
    const double norm = GradientNorm<float>(g);
    ClipGradients<float>(g, norm, 0.5 * norm);
    omp_set_num_threads(saved);
    p.insert(p.end(), g.begin(), g.end());
    p.push_back(static_cast<float>(norm));
    return p;
  };
  EXPECT_TRUE(run(1) == run(2));
  EXPECT_TRUE(run(1) == run(3));
}

TEST(GradientClipTest, NormAndTorchClipFormula) {
  std::vector<double> g = testing::Uniform(1000, 4);
  double ss = 0;
  for (double x : g) ss += x * x;
  const double norm = GradientNorm<double>(g);
  EXPECT_NEAR(norm, std::sqrt(ss), 1e-12 * std::sqrt(ss));
  std::vector<double> c = g;
  EXPECT_EQ(ClipGradients<double>(c, norm, 2 * norm), 1.0);  // below the limit: untouched
  EXPECT_TRUE(c == g);
  const double coef = ClipGradients<double>(c, norm, 0.25 * norm);
  EXPECT_DOUBLE_EQ(coef, 0.25 * norm / (norm + 1e-6));
  for (size_t i = 0; i < g.size(); ++i) EXPECT_DOUBLE_EQ(c[i], g[i] * coef);
  std::vector<double> nan = {1.0, NAN};
  EXPECT_TRUE(std::isnan(GradientNorm<double>(nan)));
  EXPECT_THROW(ClipGradients<double>(nan, NAN, 1.0), ConfigError);
  EXPECT_THROW(ClipGradients<double>(c, norm, 0.0), ConfigError);
}

TEST(AdamWTest, BadSettingsAreConfigErrors) {
  const ParameterLayout layout(testing::ModelOf(Small()));
  AdamWConfig cfg;
  cfg.beta2 = 1.0;
  EXPECT_THROW(AdamW<float>(layout, cfg), ConfigError);
  cfg = {};
  cfg.eps = 0;
  EXPECT_THROW(AdamW<float>(layout, cfg), ConfigError);
  AdamW<float> ok(layout, AdamWConfig{});
  std::vector<float> p(static_cast<size_t>(layout.total())), g(p.size());
  EXPECT_THROW(ok.Step(p, g, NAN), ConfigError);
  std::vector<float> short_g(3);
  EXPECT_THROW(ok.Step(p, short_g, 0.1), ShapeError);
}

}  // namespace
}  // namespace posenc
