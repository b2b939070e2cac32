// posenc's training code against an independent implementation: PyTorch (Debian's python3-torch, run by
// /usr/bin/python3) builds the same model in plain torch (tests/train/torch_oracle.py) from the weights, tokens and
// RoPE tables written here, trains it 10 steps with torch.optim.AdamW + clip_grad_norm_, and differentiates single
// layers with autograd. Skipped, with the reason, when /usr/bin/python3 or its torch is missing.
//
// Bounds (e_g = 2^-30: the float64 gradient's relative rounding, tests/grad_check.h; rho = 1e-3: the float32
// gradient's, tests/train/train_model_test.cc). A relative error e in every gradient changes each AdamW update
// lr m_hat / (sqrt(v_hat) + eps) by at most 2 e lr per element (the ratio is homogeneous of degree 0 in g when
// eps << sqrt(v_hat), less sensitive otherwise; clipping scales every element alike), so after s <= 10 steps the
// weights differ by at most 20 e lr_max, and the loss by ||grad L||_1 * 20 e lr_max (twice the initial ||grad
// L||_1, a margin for its growth) plus the forward's own rounding: 2^-39 max(1, L) in float64, 1e-4 L in float32.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "grad_check.h"
#include "posenc/train/config_json.h"
#include "posenc/model/layers/classifier_loss.h"
#include "posenc/model/layers/self_attention.h"
#include "posenc/train/trainer.h"
#include "rope_methods_util.h"
#include "train/tiny_model.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
constexpr const char* kPython = "/usr/bin/python3";
constexpr int64_t kBatch = 2, kCtx = testing::kTinyCtx, kSteps = 10;

template <typename T>
void WriteRaw(const fs::path& p, const std::vector<T>& v) {
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::vector<double> ReadF64(const fs::path& p) {
  std::ifstream f(p, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot read " + p.string());
  std::vector<double> v(static_cast<size_t>(f.tellg()) / sizeof(double));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(v.size() * sizeof(double)));
  return v;
}

// The full per-(query row, key) tables the oracle takes: entry (p, j) rotates key j for row p (the static row j,
// or row p's own table for pre-rotation rows), (p, p) rotates q_p.
nlohmann::json RopeJson(const testing::MethodTables& m, int64_t ctx, const fs::path& dir, const std::string& tag) {
  const int64_t half = m.table.half;
  std::vector<double> cos(static_cast<size_t>(ctx * ctx * half)), sin(cos.size());
  for (int64_t p = 0; p < ctx; ++p) {
    const bool own = m.pre_rotation != nullptr && !m.pre_rotation->shared(p);
    for (int64_t j = 0; j < ctx; ++j) {
      for (int64_t i = 0; i < half; ++i) {
        const size_t at = static_cast<size_t>((p * ctx + j) * half + i);
        cos[at] = own && j <= p ? m.pre_rotation->at(p, 0, i, j) : m.table.cos[static_cast<size_t>(j * half + i)];
        sin[at] = own && j <= p ? m.pre_rotation->at(p, 1, i, j) : m.table.sin[static_cast<size_t>(j * half + i)];
      }
    }
  }
  WriteRaw(dir / (tag + "_cos.f64"), cos);
  WriteRaw(dir / (tag + "_sin.f64"), sin);
  return {{"half", half},
          {"layout", m.layout == RopeLayout::kInterleaved ? "interleaved" : "half-split"},
          {"softmax_scale_multiplier", m.softmax_scale_multiplier},
          {"cos", tag + "_cos.f64"},
          {"sin", tag + "_sin.f64"}};
}

struct TrainCase {
  std::string name;
  PositionEncoding pe = PositionEncoding::kRope;
  std::string method = "none";
  RopeLayout layout = RopeLayout::kInterleaved;
  int64_t half = 4;
  bool bias = false, tied = true;
};

const TrainCase kTrainCases[] = {
    {"train_rope_none"},
    {"train_rope_yarn_halfsplit_partial_bias_untied", PositionEncoding::kRope, "yarn", RopeLayout::kHalfSplit, 3,
     true, false},
    {"train_rope_dynamic", PositionEncoding::kRope, "dynamic"},
    {"train_sinusoidal", PositionEncoding::kSinusoidal},
    {"train_learned", PositionEncoding::kLearned},
    {"train_none", PositionEncoding::kNone},
};

TrainShape ConfigOf(const TrainCase& tc) { return testing::TinyTrainConfig(tc.pe, tc.bias, tc.tied); }

TrainerOptions Options() {
  TrainerOptions o;
  o.adamw.weight_decay = 0.1;
  o.schedule = {1e-2, 1e-3, 3, kSteps};
  o.grad_clip = 0.5;  // clips the first steps
  return o;
}

// Our run of a case: losses before each step and after the last, and ||grad L||_1 at step 0.
template <typename T>
std::pair<std::vector<double>, double> RunOurs(const TrainCase& tc, const std::vector<float>& init,
                                               const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                               const AttentionRope& rope) {
  TrainModel<T> m(ConfigOf(tc));
  std::copy(init.begin(), init.end(), m.parameters().begin());
  Trainer<T> trainer(m, Options());
  const TokenBatch batch{inputs, targets, kBatch, kCtx};
  std::vector<double> losses;
  double g1 = 0;
  for (int64_t s = 0; s < kSteps; ++s) {
    losses.push_back(trainer.Step(batch, rope).loss);
    if (s == 0) {
      // the step clipped and applied the gradients; recompute the step-0 gradient on a copy for ||grad L||_1
      TrainModel<T> m0(ConfigOf(tc));
      std::copy(init.begin(), init.end(), m0.parameters().begin());
      Activations<T> a;
      m0.Forward(batch, rope, a);
      m0.Backward(batch, rope, a);
      for (T g : m0.gradients()) g1 += std::fabs(static_cast<double>(g));
    }
  }
  losses.push_back(m.Forward(batch, rope, trainer.activations()));
  return {losses, g1};
}

class TorchOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kPython)) GTEST_SKIP() << kPython << " is absent: the PyTorch oracle cannot run";
    dir_ = fs::temp_directory_path() / ("posenc_torch_oracle_" + std::to_string(getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  // Runs the oracle on job.json; returns its results, or skips the test with the oracle's reason.
  nlohmann::json Run(const nlohmann::json& job) {
    std::ofstream(dir_ / "job.json") << job.dump();
    const std::string cmd = std::string(kPython) + " '" + POSENC_SOURCE_DIR + "/tests/train/torch_oracle.py' '" +
                            dir_.string() + "' 2>&1";
    FILE* pipe = popen(cmd.c_str(), "r");
    if (pipe == nullptr) throw std::runtime_error("cannot run " + cmd);
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
    const int status = pclose(pipe);
    const size_t brace = out.rfind("\n{");
    const nlohmann::json answer = nlohmann::json::parse(out.substr(brace == std::string::npos ? 0 : brace + 1), nullptr, false);
    if (answer.is_object() && answer.contains("skipped")) {
      skipped_ = answer["skipped"].get<std::string>();
      return {};
    }
    EXPECT_EQ(status, 0) << out;
    std::ifstream in(dir_ / "results.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
  }
  fs::path dir_;
  std::string skipped_;
};

TEST_F(TorchOracleTest, LossesOfTenAdamWStepsAndLayerGradientsMatchPyTorch) {
  nlohmann::json job = {{"cases", nlohmann::json::array()}};
  struct Ours {
    std::string name;
    std::vector<double> l64, l32;
    double g1 = 0;
  };
  std::vector<Ours> ours;
  std::vector<testing::MethodTables> keep;
  uint64_t seed = 7;
  for (const TrainCase& tc : kTrainCases) {
    const TrainShape c = ConfigOf(tc);
    TrainModel<float> init_model(c);
    init_model.InitParameters(++seed);
    const std::vector<float> init(init_model.parameters().begin(), init_model.parameters().end());
    std::mt19937_64 rng(seed);
    std::vector<int32_t> inputs, targets;
    for (int64_t i = 0; i < kBatch * kCtx; ++i) inputs.push_back(static_cast<int32_t>(rng() % c.vocab_size));
    for (int64_t i = 0; i < kBatch * kCtx; ++i) targets.push_back(static_cast<int32_t>(rng() % c.vocab_size));
    targets[4] = -1;  // an ignored position
    keep.push_back(tc.pe == PositionEncoding::kRope ? testing::BuildMethod(tc.method, 8, tc.half, kCtx, kCtx / 2, tc.layout)
                                                    : testing::MethodTables{});
    const AttentionRope rope = keep.back().rope();
    Ours o;
    o.name = tc.name;
    std::tie(o.l64, o.g1) = RunOurs<double>(tc, init, inputs, targets, rope);
    o.l32 = RunOurs<float>(tc, init, inputs, targets, rope).first;
    ours.push_back(o);

    nlohmann::json layout = nlohmann::json::array();
    for (const ParameterTensor& t : init_model.layout().tensors()) {
      layout.push_back({{"name", t.name}, {"offset", t.offset}, {"shape", t.shape}});
    }
    WriteRaw(dir_ / (tc.name + "_params.f64"), std::vector<double>(init.begin(), init.end()));
    WriteRaw(dir_ / (tc.name + "_inputs.i32"), inputs);
    WriteRaw(dir_ / (tc.name + "_targets.i32"), targets);
    const TrainerOptions opt = Options();
    nlohmann::json cs = {{"name", tc.name}, {"kind", "train"}, {"config", TrainShapeToJson(c)}, {"layout", layout},
                         {"params", tc.name + "_params.f64"}, {"inputs", tc.name + "_inputs.i32"},
                         {"targets", tc.name + "_targets.i32"}, {"batch", kBatch}, {"ctx", kCtx}, {"steps", kSteps},
                         {"adamw", {{"beta1", opt.adamw.beta1}, {"beta2", opt.adamw.beta2}, {"eps", opt.adamw.eps},
                                    {"weight_decay", opt.adamw.weight_decay}}},
                         {"schedule", {{"max_lr", opt.schedule.max_lr}, {"min_lr", opt.schedule.min_lr},
                                       {"warmup_steps", opt.schedule.warmup_steps},
                                       {"total_steps", opt.schedule.total_steps}}},
                         {"grad_clip", opt.grad_clip}};
    if (tc.pe == PositionEncoding::kRope) cs["rope"] = RopeJson(keep.back(), kCtx, dir_, tc.name);
    job["cases"].push_back(cs);
  }

  // Layer cases: attention (GQA, yarn interleaved / half-split partial / dynamic) and the classifier loss.
  const SelfAttentionShape shape{2, 11, {4, 2, 8}};
  const int64_t N = shape.batch * shape.ctx;
  struct AttentionCase {
    std::string name;
    testing::MethodTables m;
  };
  std::vector<AttentionCase> att;
  att.push_back({"attention_yarn", testing::BuildMethod("yarn", 8, 4, shape.ctx, 5)});
  att.push_back({"attention_halfsplit_partial", testing::BuildMethod("linear", 8, 2, shape.ctx, 5, RopeLayout::kHalfSplit)});
  att.push_back({"attention_dynamic", testing::BuildMethod("dynamic", 8, 4, shape.ctx, 5)});
  const std::vector<double> qkv = testing::Uniform(N * shape.qkv_width(), 31, 2.0);
  const std::vector<double> dout = testing::Uniform(N * shape.out_width(), 32);
  WriteRaw(dir_ / "attention_qkv.f64", qkv);
  WriteRaw(dir_ / "attention_dout.f64", dout);
  for (const AttentionCase& a : att) {
    job["cases"].push_back({{"name", a.name}, {"kind", "attention"}, {"batch", shape.batch}, {"ctx", shape.ctx},
                            {"n_heads", 4}, {"n_kv_heads", 2}, {"head_dim", 8}, {"qkv", "attention_qkv.f64"},
                            {"dout", "attention_dout.f64"}, {"rope", RopeJson(a.m, shape.ctx, dir_, a.name)}});
  }
  const int64_t cn = 9, cdim = 16, cV = 40;
  const std::vector<double> cx = testing::Uniform(cn * cdim, 33, 2.0), cw = testing::Uniform(cV * cdim, 34);
  std::vector<int32_t> ct = {3, 39, -1, 0, 7, 7, 12, -1, 25};
  WriteRaw(dir_ / "cls_x.f64", cx);
  WriteRaw(dir_ / "cls_w.f64", cw);
  WriteRaw(dir_ / "cls_t.i32", ct);
  job["cases"].push_back({{"name", "classifier_loss"}, {"kind", "classifier_loss"}, {"n", cn}, {"dim", cdim},
                          {"vocab", cV}, {"x", "cls_x.f64"}, {"w", "cls_w.f64"}, {"targets", "cls_t.i32"}});

  const nlohmann::json res = Run(job);
  if (!skipped_.empty()) GTEST_SKIP() << "PyTorch oracle skipped: " << skipped_;
  const nlohmann::json& r = res["results"];
  std::printf("PyTorch %s\n", res["torch"].get<std::string>().c_str());

  const double lr_max = Options().schedule.max_lr;
  for (const Ours& o : ours) {
    SCOPED_TRACE(o.name);
    const std::vector<double> theirs = r[o.name]["losses"].get<std::vector<double>>();
    ASSERT_EQ(theirs.size(), o.l64.size());
    double worst64 = 0, worst32 = 0;
    for (size_t s = 0; s < theirs.size(); ++s) {
      const double b64 = 2 * o.g1 * 20 * 0x1p-30 * lr_max + 0x1p-39 * std::max(1.0, theirs[s]);
      const double b32 = 2 * o.g1 * 20 * 1e-3 * lr_max + 1e-4 * theirs[s];
      EXPECT_LE(std::fabs(o.l64[s] - theirs[s]), b64) << "float64, loss " << s;
      EXPECT_LE(std::fabs(o.l32[s] - theirs[s]), b32) << "float32, loss " << s;
      worst64 = std::max(worst64, std::fabs(o.l64[s] - theirs[s]));
      worst32 = std::max(worst32, std::fabs(o.l32[s] - theirs[s]));
    }
    EXPECT_LT(theirs.back(), theirs.front()) << "10 steps should lower the loss";
    std::printf("%-48s torch loss %.6f -> %.6f | |ours64 - torch| <= %.2e, |ours32 - torch| <= %.2e\n",
                o.name.c_str(), theirs.front(), theirs.back(), worst64, worst32);
  }

  for (const AttentionCase& a : att) {
    SCOPED_TRACE(a.name);
    std::vector<double> qk(N * shape.qk_width()), out(N * shape.out_width()), lse(N * 4), d(qkv.size(), 0.0);
    SelfAttentionWorkspace ws;
    SelfAttentionForward<double>(shape, a.m.rope(), qkv.data(), qk.data(), out.data(), lse.data(), ws);
    SelfAttentionBackward<double>(shape, a.m.rope(), qkv.data(), qk.data(), out.data(), lse.data(), dout.data(), d.data(), ws);
    const std::vector<double> t_out = ReadF64(dir_ / r[a.name]["out"].get<std::string>());
    const std::vector<double> t_d = ReadF64(dir_ / r[a.name]["dqkv"].get<std::string>());
    double m_out = 0, m_d = 0, e_out = 0, e_d = 0;
    for (size_t i = 0; i < out.size(); ++i) m_out = std::max(m_out, std::fabs(t_out[i])), e_out = std::max(e_out, std::fabs(out[i] - t_out[i]));
    for (size_t i = 0; i < d.size(); ++i) m_d = std::max(m_d, std::fabs(t_d[i])), e_d = std::max(e_d, std::fabs(d[i] - t_d[i]));
    // float64 both: sums of <= 2^10 terms, 2^-43 relative to the largest magnitude
    EXPECT_LE(e_out, 0x1p-43 * 64 * m_out);
    EXPECT_LE(e_d, 0x1p-43 * 64 * m_d);
    std::printf("%-48s max |ours - torch autograd|: out %.2e, dqkv %.2e (max |dqkv| %.2f)\n", a.name.c_str(), e_out,
                e_d, m_d);
  }
  {
    std::vector<double> x = cx, w = cw, logits(cn * cV), lse(cn), dx(cx.size(), 0.0), dw(cw.size(), 0.0);
    const double loss = ClassifierLossForward<double>(x.data(), w.data(), ct, cdim, cV, logits.data(), lse.data());
    ClassifierLossBackward<double>(x.data(), w.data(), ct, cdim, cV, lse.data(), 1.0, logits.data(), dx.data(), dw.data());
    EXPECT_NEAR(loss, r["classifier_loss"]["loss"].get<double>(), 1e-13 * loss);
    const std::vector<double> t_dx = ReadF64(dir_ / r["classifier_loss"]["dx"].get<std::string>());
    const std::vector<double> t_dw = ReadF64(dir_ / r["classifier_loss"]["dw"].get<std::string>());
    for (size_t i = 0; i < dx.size(); ++i) EXPECT_NEAR(dx[i], t_dx[i], 1e-14) << "dx " << i;
    for (size_t i = 0; i < dw.size(); ++i) EXPECT_NEAR(dw[i], t_dw[i], 1e-14) << "dw " << i;
  }
}

}  // namespace
}  // namespace posenc
