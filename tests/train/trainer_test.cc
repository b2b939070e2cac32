// The trainer: a step lowers the loss on a repeated batch, two runs give the same bits, and a non-finite loss or
// gradient stops the step with the step, the layer and the tensor named (weights left as they were).
#include "posenc/train/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "rope_methods_util.h"

namespace posenc {
namespace {

TrainShape Tiny() {
  TrainShape c;
  c.dim = 16;
  c.hidden_dim = 24;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = 20;
  c.max_seq_len = 16;
  return c;
}

struct Data {
  std::vector<int32_t> inputs, targets;
  Data() {
    std::mt19937_64 rng(5);
    for (int i = 0; i < 2 * 16; ++i) inputs.push_back(static_cast<int32_t>(rng() % 20));
    for (int i = 0; i < 2 * 16; ++i) targets.push_back(static_cast<int32_t>(rng() % 20));
  }
  TokenBatch batch() const { return {inputs, targets, 2, 16}; }
};

TrainerOptions Options() {
  TrainerOptions o;
  o.schedule = {3e-3, 3e-4, 2, 20};
  o.grad_clip = 1.0;
  return o;
}

TEST(TrainerTest, LossFallsOnARepeatedBatchAndRunsAreBitIdentical) {
  const Data d;
  const testing::MethodTables rope = testing::BuildMethod("none", 8, 4, 16, 16);
  auto run = [&] {
    TrainModel<float> m(Tiny());
    m.InitParameters(42);
    Trainer<float> trainer(m, Options());
    std::vector<double> losses;
    for (int s = 0; s < 12; ++s) losses.push_back(trainer.Step(d.batch(), rope.rope()).loss);
    std::vector<float> p(m.parameters().begin(), m.parameters().end());
    return std::make_pair(losses, p);
  };
  const auto [losses, params] = run();
  EXPECT_LT(losses.back(), losses.front() - 0.1) << "12 steps on one batch must overfit it";
  const auto [losses2, params2] = run();
  EXPECT_TRUE(losses == losses2);
  EXPECT_TRUE(params == params2);
}

TEST(TrainerTest, NonFiniteParameterStopsTheStepNamingLayerAndTensor) {
  const Data d;
  const testing::MethodTables rope = testing::BuildMethod("none", 8, 4, 16, 16);
  TrainModel<float> m(Tiny());
  m.InitParameters(1);
  Trainer<float> trainer(m, Options());
  trainer.Step(d.batch(), rope.rope());
  trainer.Step(d.batch(), rope.rope());
  const ParameterTensor& wq = m.layout().Find("blk.1.attn_q.weight");
  m.parameters()[static_cast<size_t>(wq.offset + 5)] = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> before(m.parameters().begin(), m.parameters().end());
  try {
    trainer.Step(d.batch(), rope.rope());
    FAIL() << "no error";
  } catch (const NumericError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.1.attn_q.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("element 5"), std::string::npos) << msg;
  }
  const std::vector<float> after(m.parameters().begin(), m.parameters().end());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0) << "weights changed";
  EXPECT_EQ(trainer.step(), 2);
}

// eps = 0 and an all-zero embedding row: RMSNorm divides 0 by 0 in block 0 (a finite model, a NaN activation).
TEST(TrainerTest, NonFiniteActivationIsNamedByLayerAndTensor) {
  const Data d;
  TrainShape c = Tiny();
  c.position_encoding = PositionEncoding::kNone;
  TrainModel<float> m(c);
  m.InitParameters(2);
  // Finite weights whose product overflows: a one-hot embedding row normalises to sqrt(dim) in its channel 0,
  // which times an attn_norm weight of 1e38 is past float's 3.4e38.
  const ParameterTensor& emb = m.layout().Find("token_embd.weight");
  for (int64_t i = 0; i < c.dim; ++i) {
    m.parameters()[static_cast<size_t>(emb.offset + d.inputs[3] * c.dim + i)] = i == 0 ? 1.0f : 0.0f;
  }
  const ParameterTensor& norm = m.layout().Find("blk.0.attn_norm.weight");
  for (int64_t i = 0; i < c.dim; ++i) m.parameters()[static_cast<size_t>(norm.offset + i)] = 1e38f;
  Trainer<float> trainer(m, Options());
  try {
    trainer.Step(d.batch(), AttentionRope{});
    FAIL() << "no error";
  } catch (const NumericError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 0"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.0 attn_norm output"), std::string::npos) << msg;
  }
}

TEST(TrainerTest, NonFiniteGradientIsNamedInBackwardOrder) {
  const Data d;
  const testing::MethodTables rope = testing::BuildMethod("none", 8, 4, 16, 16);
  TrainModel<float> m(Tiny());
  m.InitParameters(3);
  Activations<float> acts;
  m.ZeroGradients();
  m.Forward(d.batch(), rope.rope(), acts);
  m.Backward(d.batch(), rope.rope(), acts);
  // two bad gradients: the one nearer the loss (block 1) is named
  m.gradients()[static_cast<size_t>(m.layout().Find("blk.0.ffn_up.weight").offset)] = INFINITY;
  m.gradients()[static_cast<size_t>(m.layout().Find("blk.1.attn_v.weight").offset + 2)] = NAN;
  try {
    ThrowIfGradientsNotFinite(m, 7, GradientNorm<float>(m.gradients()));
    FAIL() << "no error";
  } catch (const NumericError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 7"), std::string::npos) << msg;
    EXPECT_NE(msg.find("layer 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("blk.1.attn_v.weight"), std::string::npos) << msg;
  }
  ThrowIfGradientsNotFinite(m, 7, 1.0);  // a finite norm passes
}

TEST(TrainerTest, BadOptionsAreConfigErrors) {
  TrainModel<float> m(Tiny());
  TrainerOptions o = Options();
  o.grad_clip = -1;
  EXPECT_THROW(Trainer<float>(m, o), ConfigError);
  o = Options();
  o.schedule.max_lr = 0;
  EXPECT_THROW(Trainer<float>(m, o), ConfigError);
}

}  // namespace
}  // namespace posenc
