// The training model end to end on a tiny shape (2 layers, 4 heads sharing 2 kv heads of head_dim 8): every
// parameter tensor's float64 gradient against central finite differences (tests/grad_check.h: the bound is derived
// there) for each RoPE method (none, linear, ntk, yarn, dynamic), each position encoding (rope, sinusoidal,
// learned, none) and the optional parts (half-split partial rotary, q/k/v biases, an untied classifier, ignored
// targets); the float32 model against the float64 one; thread-count independence; bad batches.
#include "posenc/train/train_model.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"
#include "rope_methods_util.h"
#include "train/tiny_model.h"

namespace posenc {
namespace {

constexpr int64_t kBatch = 2, kCtx = testing::kTinyCtx;

TrainShape Tiny(PositionEncoding pe) { return testing::TinyTrainConfig(pe); }

struct Batch {
  std::vector<int32_t> inputs, targets;
  TokenBatch view() const { return {inputs, targets, kBatch, kCtx}; }
};

Batch MakeBatch(int64_t vocab, uint64_t seed, bool some_ignored = false) {
  std::mt19937_64 rng(seed);
  Batch b;
  for (int64_t i = 0; i < kBatch * kCtx; ++i) b.inputs.push_back(static_cast<int32_t>(rng() % vocab));
  for (int64_t i = 0; i < kBatch * kCtx; ++i) b.targets.push_back(static_cast<int32_t>(rng() % vocab));
  if (some_ignored) b.targets[3] = b.targets[kCtx + 5] = -1;
  return b;
}

// Seeded init, then matrices scaled up 8x (std 0.16: attention far from uniform), norms 1 +- 0.3 and biases
// +- 0.1, so every tensor's gradient is well away from 0.
template <typename T>
void Init(TrainModel<T>& m, uint64_t seed) {
  m.InitParameters(seed);
  std::mt19937_64 rng(seed + 1);
  std::uniform_real_distribution<double> ud(-1, 1);
  for (const ParameterTensor& t : m.layout().tensors()) {
    T* p = m.parameters().data() + t.offset;
    for (int64_t i = 0; i < t.size(); ++i) {
      if (t.shape.size() >= 2) {
        p[i] *= 8;
      } else if (t.name.ends_with("norm.weight")) {
        p[i] = static_cast<T>(static_cast<float>(1 + 0.3 * ud(rng)));
      } else {
        p[i] = static_cast<T>(static_cast<float>(0.1 * ud(rng)));
      }
    }
  }
}

struct ModelCase {
  std::string name;
  PositionEncoding pe = PositionEncoding::kRope;
  std::string method = "none";  // RoPE method when pe is rope
  RopeLayout layout = RopeLayout::kInterleaved;
  int64_t half = 4;
  bool bias = false;
  bool tied = true;
  bool ignored = false;
  bool qk_norm = false;  // per-head q/k RMSNorm before RoPE (Qwen3)
};

const ModelCase kCases[] = {
    {"rope none"},
    {"rope linear", PositionEncoding::kRope, "linear"},
    {"rope ntk", PositionEncoding::kRope, "ntk"},
    {"rope yarn", PositionEncoding::kRope, "yarn"},
    {"rope dynamic (pre-rotation)", PositionEncoding::kRope, "dynamic"},
    {"rope half-split partial, biases, untied, ignored targets", PositionEncoding::kRope, "yarn",
     RopeLayout::kHalfSplit, 3, true, false, true},
    {"rope qk-norm (Qwen3), biases, untied", PositionEncoding::kRope, "yarn", RopeLayout::kInterleaved, 4, true,
     false, false, true},
    {"sinusoidal", PositionEncoding::kSinusoidal},
    {"learned", PositionEncoding::kLearned},
    {"none", PositionEncoding::kNone},
};

ModelConfig ConfigOf(const ModelCase& mc) {
  ModelConfig c = testing::ModelOf(testing::TinyTrainConfig(mc.pe, mc.bias, mc.tied));
  if (mc.qk_norm) c.qk_norm = QkNorm::kPerHead;
  return c;
}

testing::MethodTables TablesOf(const ModelCase& mc) {
  if (mc.pe != PositionEncoding::kRope) return testing::MethodTables{};
  return testing::BuildMethod(mc.method, 8, mc.half, kCtx, kCtx / 2, mc.layout);
}

TEST(TrainModelTest, EveryParameterTensorMatchesFiniteDifferencesInFloat64) {
  uint64_t seed = 10;
  for (const ModelCase& mc : kCases) {
    SCOPED_TRACE(mc.name);
    TrainModel<double> model(ConfigOf(mc));
    Init(model, ++seed);
    const testing::MethodTables tables = TablesOf(mc);
    const AttentionRope rope = tables.rope();
    const Batch batch = MakeBatch(model.config().vocab_size, seed, mc.ignored);
    Activations<double> acts;
    auto loss = [&] { return model.Forward(batch.view(), rope, acts); };
    const double l0 = loss();
    ASSERT_TRUE(std::isfinite(l0));
    model.ZeroGradients();
    model.Backward(batch.view(), rope, acts);
    int checked = 0;
    for (const ParameterTensor& t : model.layout().tensors()) {
      std::vector<double*> x;
      std::vector<double> g(model.gradients().begin() + t.offset, model.gradients().begin() + t.offset + t.size());
      for (int64_t i = 0; i < t.size(); ++i) x.push_back(model.parameters().data() + t.offset + i);
      EXPECT_EQ(testing::CheckGradient(t.name, loss, x, g, seed * 100 + static_cast<uint64_t>(checked)), "");
      ++checked;
    }
    EXPECT_EQ(checked, static_cast<int>(model.layout().tensors().size()));
  }
  std::printf("largest |finite difference - analytic| / |g| seen: %.3g\n", testing::MaxObservedFdError());
}

// The float32 model (sgemm, Highway attention tiles, ExpF32) against the float64 model on the same float32
// weights. Bound, normwise per gradient tensor: every stage of the chain from the loss to a parameter (about 15
// per block: norms, products, attention, SwiGLU, residual adds, and the loss) rounds with at most gamma_k, k <= 2
// max(C, F, V, T) = 96 summands (96 u = 5.7e-6), amplified by the stage's condition (<= 4 at these scales);
// 2 blocks + the ends give ~40 stages: 40 * 96 * 4 u = 9e-4, so ||g32 - g64|| <= 1e-3 ||g64||. The loss is a
// float64 sum of float32 terms: |L32 - L64| <= 1e-4 L.
TEST(TrainModelTest, Float32MatchesFloat64) {
  uint64_t seed = 50;
  for (const ModelCase& mc : kCases) {
    SCOPED_TRACE(mc.name);
    TrainModel<float> m32(ConfigOf(mc));
    TrainModel<double> m64(ConfigOf(mc));
    Init(m32, ++seed);
    std::copy(m32.parameters().begin(), m32.parameters().end(), m64.parameters().begin());
    const testing::MethodTables tables = TablesOf(mc);
    const Batch batch = MakeBatch(m32.config().vocab_size, seed, mc.ignored);
    Activations<float> a32;
    Activations<double> a64;
    const double l32 = m32.Forward(batch.view(), tables.rope(), a32);
    const double l64 = m64.Forward(batch.view(), tables.rope(), a64);
    EXPECT_LE(std::fabs(l32 - l64), 1e-4 * l64);
    m32.ZeroGradients();
    m64.ZeroGradients();
    m32.Backward(batch.view(), tables.rope(), a32);
    m64.Backward(batch.view(), tables.rope(), a64);
    for (const ParameterTensor& t : m32.layout().tensors()) {
      double err = 0, norm = 0;
      for (int64_t i = t.offset; i < t.offset + t.size(); ++i) {
        const double d = m32.gradients()[i] - m64.gradients()[i];
        err += d * d;
        norm += m64.gradients()[i] * m64.gradients()[i];
      }
      EXPECT_LE(std::sqrt(err), 1e-3 * std::sqrt(norm)) << t.name;
    }
  }
}

TEST(TrainModelTest, Float32StepDoesNotDependOnTheThreadCount) {
  TrainShape c = Stories260KConfig();
  c.n_layers = 2;
  const testing::MethodTables tables = testing::BuildMethod("yarn", 8, 4, 64, 32);
  std::mt19937_64 rng(3);
  std::vector<int32_t> inputs(4 * 64), targets(4 * 64);
  for (auto* v : {&inputs, &targets}) {
    for (int32_t& x : *v) x = static_cast<int32_t>(rng() % 512);
  }
  const TokenBatch batch{inputs, targets, 4, 64};
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    TrainModel<float> m(c);
    m.InitParameters(7);
    Activations<float> a;
    const double loss = m.Forward(batch, tables.rope(), a);
    m.Backward(batch, tables.rope(), a);
    omp_set_num_threads(saved);
    std::vector<float> g(m.gradients().begin(), m.gradients().end());
    g.push_back(static_cast<float>(loss));
    return g;
  };
  const std::vector<float> one = run(1);
  EXPECT_TRUE(one == run(2));
  EXPECT_TRUE(one == run(3));
}

TEST(TrainModelTest, BadBatchesAndRopeMismatchesAreErrors) {
  TrainModel<float> rope_model(Tiny(PositionEncoding::kRope));
  TrainModel<float> learned(Tiny(PositionEncoding::kLearned));
  const testing::MethodTables tables = testing::BuildMethod("none", 8, 4, kCtx, kCtx / 2);
  const Batch b = MakeBatch(48, 1);
  Activations<float> a;
  EXPECT_THROW(rope_model.Forward(b.view(), AttentionRope{}, a), ConfigError);  // rope without a table
  EXPECT_THROW(learned.Forward(b.view(), tables.rope(), a), ConfigError);        // a table without rope
  TokenBatch short_batch = b.view();
  short_batch.ctx = kCtx + 1;
  EXPECT_THROW(learned.Forward(short_batch, AttentionRope{}, a), ShapeError);  // spans hold 2 x 12 ids
  Batch bad = b;
  bad.inputs[5] = 48;
  EXPECT_THROW(rope_model.Forward(bad.view(), tables.rope(), a), RangeError);
  // a longer window than the learned table
  TrainShape c = Tiny(PositionEncoding::kLearned);
  c.max_seq_len = kCtx - 1;
  TrainModel<float> small(c);
  try {
    small.Forward(b.view(), AttentionRope{}, a);
    FAIL() << "no error";
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("max_seq_len = 11"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace posenc
