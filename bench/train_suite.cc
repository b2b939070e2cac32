// Training benchmark suite: see train_suite.h.
#include "train_suite.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "posenc/blas/gemm.h"
#include "posenc/kernels/log_sum_exp_kernels.h"
#include "posenc/kernels/train_kernels.h"
#include "posenc/model/layers/classifier_loss.h"
#include "posenc/model/layers/linear.h"
#include "posenc/model/layers/rmsnorm.h"
#include "posenc/model/layers/self_attention.h"
#include "posenc/model/layers/swiglu.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/train/trainer.h"
#include "suite_util.h"

namespace posenc::bench {
namespace {

constexpr double kLr = 1e-3;
constexpr double kGradClip = 1.0;

// Resets the process's peak resident set (VmHWM) to its current size (Linux >= 4.0: /proc/self/clear_refs "5").
void ResetPeakRss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";
}

// VmHWM of /proc/self/status in MiB, or -1.
double PeakRssMb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return -1.0;
}

// The RoPE of stories260K (llama2.c: theta 10000, interleaved pairs) for positions [0, ctx).
CosSinTable StoriesRope(int64_t ctx) {
  RopeParams p;
  p.head_dim = 8;
  std::vector<int64_t> positions(static_cast<size_t>(ctx));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  return ComputeCosSin(ComputeRopeFrequencies(p), positions);
}

AttentionRope RopeOf(const CosSinTable& t) { return {View(t), RopeLayout::kInterleaved, nullptr, 1.0}; }

template <typename Fn>
double BestSeconds(int reps, Fn&& fn) {
  double best = 1e300;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, Seconds(t0, Clock::now()));
  }
  return best;
}

// ---- keeping the attention weights (the design the library does not use), for the comparison ----------------------

// The forward writes the weights P [batch, heads, ctx, ctx] (causal part) and the backward reads them back instead
// of recomputing them. Row blocks of 64 queries against the keys before the block's end (OpenBLAS products, GQA by
// indexing the shared kv head), softmax rows with the library's Highway kernels, RoPE with ApplyRope: the same
// building blocks as the library, only the weights are kept.
class StoredAttention {
 public:
  explicit StoredAttention(const SelfAttentionShape& s)
      : s_(s), d_(s.dims.head_dim), h_(s.dims.n_heads), g_(s.dims.n_kv_heads) {
    rows_.resize(static_cast<size_t>(s.batch * s.ctx));
    for (size_t i = 0; i < rows_.size(); ++i) rows_[i] = static_cast<int64_t>(i) % s.ctx;
    probs_.resize(static_cast<size_t>(s.batch * h_ * s.ctx * s.ctx));
  }

  void Forward(const AttentionRope& rope, const float* qkv, float* qk_rot, float* out) {
    const int64_t T = s_.ctx, W = s_.qkv_width(), WR = s_.qk_width(), O = s_.out_width(), km = h_ / g_;
    const int64_t N = s_.batch * T;
    ApplyRope(HeadsView{const_cast<float*>(qkv), DType::kF32, N, h_, d_, W, d_},
              HeadsView{qk_rot, DType::kF32, N, h_, d_, WR, d_}, rows_, rope.table, rope.layout);
    ApplyRope(HeadsView{const_cast<float*>(qkv + h_ * d_), DType::kF32, N, g_, d_, W, d_},
              HeadsView{qk_rot + h_ * d_, DType::kF32, N, g_, d_, WR, d_}, rows_, rope.table, rope.layout);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_)));
    OneBlasThread one;
#pragma omp parallel for schedule(static)
    for (int64_t task = 0; task < s_.batch * g_; ++task) {
      const int64_t b = task / g_, g = task % g_;
      for (int64_t h = g * km; h < (g + 1) * km; ++h) {
        for (int64_t r0 = 0; r0 < T; r0 += kRows) {
          const int64_t r1 = std::min(T, r0 + kRows), rows = r1 - r0;
          float* P = probs_.data() + ((b * h_ + h) * T + r0) * T;
          GemmNT(rows, r1, d_, qk_rot + (b * T + r0) * WR + h * d_, WR, qk_rot + b * T * WR + (h_ + g) * d_, WR, P, T);
          for (int64_t i = 0; i < rows; ++i) {
            float* p = P + i * T;
            const int64_t n = r0 + i + 1;
            for (int64_t j = 0; j < n; ++j) p[j] *= scale;
            const double lse = kernels::LogSumExp(p, n);
            kernels::SoftmaxScaleRow(p, n, static_cast<float>(lse), 1.0f);
            std::fill(p + n, p + r1, 0.0f);
          }
          GemmNN(rows, d_, r1, P, T, qkv + b * T * W + (h_ + g_ + g) * d_, W, out + (b * T + r0) * O + h * d_, O);
        }
      }
    }
  }

  void Backward(const AttentionRope& rope, const float* qkv, const float* qk_rot, const float* out, const float* dout,
                float* dqkv) {
    const int64_t T = s_.ctx, W = s_.qkv_width(), WR = s_.qk_width(), O = s_.out_width(), km = h_ / g_;
    const int64_t N = s_.batch * T;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d_)));
    dq_.assign(static_cast<size_t>(N * h_ * d_), 0.0f);
    dk_.assign(static_cast<size_t>(N * g_ * d_), 0.0f);
    {
      OneBlasThread one;
#pragma omp parallel for schedule(static)
      for (int64_t task = 0; task < s_.batch * g_; ++task) {
        const int64_t b = task / g_, g = task % g_;
        std::vector<float> ds(static_cast<size_t>(kRows * T));
        for (int64_t h = g * km; h < (g + 1) * km; ++h) {
          for (int64_t r0 = 0; r0 < T; r0 += kRows) {
            const int64_t r1 = std::min(T, r0 + kRows), rows = r1 - r0;
            const float* P = probs_.data() + ((b * h_ + h) * T + r0) * T;
            const float* go = dout + (b * T + r0) * O + h * d_;
            GemmNT(rows, r1, d_, go, O, qkv + b * T * W + (h_ + g_ + g) * d_, W, ds.data(), r1);  // dP
            for (int64_t i = 0; i < rows; ++i) {
              float dsum = 0.0f;
              for (int64_t x = 0; x < d_; ++x) dsum += go[i * O + x] * out[(b * T + r0 + i) * O + h * d_ + x];
              float* dsi = ds.data() + i * r1;
              const float* p = P + i * T;
              for (int64_t j = 0; j < r1; ++j) dsi[j] = p[j] * (dsi[j] - dsum) * scale;  // p = 0 past the diagonal
            }
            GemmTN(r1, d_, rows, P, T, go, O, dqkv + b * T * W + (h_ + g_ + g) * d_, W, 1.0f);  // dV += P^T dO
            GemmNN(rows, d_, r1, ds.data(), r1, qk_rot + b * T * WR + (h_ + g) * d_, WR,
                   dq_.data() + (b * T + r0) * h_ * d_ + h * d_, h_ * d_);                       // dQ = dS K
            GemmTN(r1, d_, rows, ds.data(), r1, qk_rot + (b * T + r0) * WR + h * d_, WR,
                   dk_.data() + b * T * g_ * d_ + g * d_, g_ * d_, 1.0f);                        // dK += dS^T Q
          }
        }
      }
    }
    ApplyRope(HeadsView::Contiguous(dq_.data(), N, h_, d_), rows_, rope.table, rope.layout, RopeDirection::kBackward);
    ApplyRope(HeadsView::Contiguous(dk_.data(), N, g_, d_), rows_, rope.table, rope.layout, RopeDirection::kBackward);
    for (int64_t t = 0; t < N; ++t) {
      for (int64_t x = 0; x < h_ * d_; ++x) dqkv[t * W + x] += dq_[static_cast<size_t>(t * h_ * d_ + x)];
      for (int64_t x = 0; x < g_ * d_; ++x) dqkv[t * W + h_ * d_ + x] += dk_[static_cast<size_t>(t * g_ * d_ + x)];
    }
  }

 private:
  static constexpr int64_t kRows = 64;
  SelfAttentionShape s_;
  int64_t d_, h_, g_;
  std::vector<int64_t> rows_;
  std::vector<float> probs_, dq_, dk_;
};

TrainAttentionResult RunAttentionCase(const TrainCase& c, const TrainBenchOptions& o) {
  const TrainShape cfg = Stories260KConfig();
  const SelfAttentionShape shape{c.batch, c.ctx, {cfg.n_heads, cfg.n_kv_heads, cfg.resolved_head_dim()}};
  const int64_t N = c.batch * c.ctx;
  const CosSinTable table = StoriesRope(c.ctx);
  const AttentionRope rope = RopeOf(table);
  std::mt19937_64 rng(11);
  std::normal_distribution<float> nd;
  std::vector<float> qkv(static_cast<size_t>(N * shape.qkv_width())), dout(static_cast<size_t>(N * shape.out_width()));
  for (float& x : qkv) x = nd(rng);
  for (float& x : dout) x = nd(rng);
  std::vector<float> qk(static_cast<size_t>(N * shape.qk_width())), out(dout.size()), lse(static_cast<size_t>(N * 8));
  std::vector<float> d(qkv.size()), out2(dout.size()), d2(qkv.size());
  SelfAttentionWorkspace ws;
  StoredAttention stored(shape);
  auto recompute = [&] {
    std::fill(d.begin(), d.end(), 0.0f);
    SelfAttentionForward<float>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), ws);
    SelfAttentionBackward<float>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), dout.data(), d.data(), ws);
  };
  auto keep = [&] {
    std::fill(d2.begin(), d2.end(), 0.0f);
    stored.Forward(rope, qkv.data(), qk.data(), out2.data());
    stored.Backward(rope, qkv.data(), qk.data(), out2.data(), dout.data(), d2.data());
  };
  recompute();
  keep();
  TrainAttentionResult r;
  r.c = c;
  double err = 0, mag = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, double(std::fabs(out[i] - out2[i]))), mag = std::max(mag, double(std::fabs(out2[i])));
  for (size_t i = 0; i < d.size(); ++i) err = std::max(err, double(std::fabs(d[i] - d2[i]))), mag = std::max(mag, double(std::fabs(d2[i])));
  r.max_rel_diff = err / mag;
  // Both compute the same float32 function with different rounding; tests/model/layers/self_attention_test.cc bounds
  // each against float64 by ((D + 9) S + T + 20) u (x 8 normwise): about 2^-10 for these scores at ctx 2048.
  if (!(r.max_rel_diff <= 0x1p-10)) {
    throw std::runtime_error(fmt::format("{}: recomputed and kept attention weights disagree: max relative difference "
                                         "{}", c.name, r.max_rel_diff));
  }
  const int reps = std::max(1, o.reps);
  r.recompute_ms = 1e3 * BestSeconds(reps, recompute);
  r.stored_ms = 1e3 * BestSeconds(reps, keep);
  r.stored_mb_per_step = static_cast<double>(c.batch * cfg.n_heads) * static_cast<double>(c.ctx) *
                         static_cast<double>(c.ctx + 1) / 2.0 * 4.0 * static_cast<double>(cfg.n_layers) / (1 << 20);
  return r;
}

// ---- one training step ---------------------------------------------------------------------------------------------

// Per layer kind, the forward and backward calls of all blocks on the activations of the last step (best of reps).
std::map<std::string, double> Breakdown(TrainModel<float>& m, Trainer<float>& trainer, const TokenBatch& batch,
                                        const AttentionRope& rope, int reps) {
  const ModelConfig& c = m.config();
  Activations<float>& a = trainer.activations();
  const int64_t N = batch.batch * batch.ctx, C = c.dim, F = c.hidden_dim, Q = c.q_dim(), K = c.kv_dim();
  const int64_t W = Q + 2 * K, L = c.n_layers;
  const SelfAttentionShape shape{batch.batch, batch.ctx, {c.n_heads, c.n_kv_heads, c.head_dim}};
  ParameterTensors<float> p = m.params(), g = m.grads();
  std::map<std::string, double> ms;
  OneBlasThread one;
  auto time = [&](const std::string& name, auto&& fn) { ms[name] = 1e3 * BestSeconds(reps, fn); };
  time("rmsnorm", [&] {
    for (int64_t l = 0; l < L; ++l) {
      for (int k = 0; k < 2; ++k) {
        float* x = (k == 0 ? a.res : a.res_mid).data() + l * N * C;
        float* rstd = (k == 0 ? a.attn_rstd : a.ffn_rstd).data() + l * N;
        RmsNormForward<float>(x, p.layers[l].attn_norm, N, C, c.norm_eps, a.ln1.data() + l * N * C, rstd);
        RmsNormBackward<float>(a.d_res.data(), x, p.layers[l].attn_norm, rstd, N, C, a.d_ln.data(), g.layers[l].attn_norm);
      }
    }
  });
  time("qkv_projection", [&] {
    for (int64_t l = 0; l < L; ++l) {
      LinearForward<float>(a.ln1.data() + l * N * C, p.layers[l].wqkv, nullptr, N, C, W, a.qkv.data() + l * N * W);
      LinearBackward<float>(a.d_qkv.data(), a.ln1.data() + l * N * C, p.layers[l].wqkv, N, C, W, a.d_ln.data(),
                            g.layers[l].wqkv, nullptr);
    }
  });
  time("attention", [&] {
    for (int64_t l = 0; l < L; ++l) {
      float* qkv = a.qkv.data() + l * N * W;
      float* qk = a.qk_rot.data() + l * N * (Q + K);
      float* att = a.att.data() + l * N * Q;
      float* lse = a.att_lse.data() + l * N * c.n_heads;
      SelfAttentionForward<float>(shape, rope, qkv, qk, att, lse, a.attention);
      SelfAttentionBackward<float>(shape, rope, qkv, qk, att, lse, a.d_att.data(), a.d_qkv.data(), a.attention);
    }
  });
  time("attention_output", [&] {
    for (int64_t l = 0; l < L; ++l) {
      LinearForward<float>(a.att.data() + l * N * Q, p.layers[l].wo, nullptr, N, Q, C, a.res_mid.data() + l * N * C,
                           OutputMode::kAccumulate);
      LinearBackward<float>(a.d_res.data(), a.att.data() + l * N * Q, p.layers[l].wo, N, Q, C, a.d_att.data(),
                            g.layers[l].wo, nullptr);
    }
  });
  time("ffn_gate_up", [&] {
    for (int64_t l = 0; l < L; ++l) {
      LinearForward<float>(a.ln2.data() + l * N * C, p.layers[l].w_gate_up, nullptr, N, C, 2 * F,
                           a.gate_up.data() + l * N * 2 * F);
      LinearBackward<float>(a.d_gate_up.data(), a.ln2.data() + l * N * C, p.layers[l].w_gate_up, N, C, 2 * F,
                            a.d_ln.data(), g.layers[l].w_gate_up, nullptr);
    }
  });
  time("swiglu", [&] {
    for (int64_t l = 0; l < L; ++l) {
      SwiGluForward<float>(a.gate_up.data() + l * N * 2 * F, N, F, a.hb.data() + l * N * F);
      SwiGluBackward<float>(a.d_hb.data(), a.gate_up.data() + l * N * 2 * F, N, F, a.d_gate_up.data());
    }
  });
  time("ffn_down", [&] {
    for (int64_t l = 0; l < L; ++l) {
      LinearForward<float>(a.hb.data() + l * N * F, p.layers[l].w_down, nullptr, N, F, C, a.res_mid.data() + l * N * C,
                           OutputMode::kAccumulate);
      LinearBackward<float>(a.d_res.data(), a.hb.data() + l * N * F, p.layers[l].w_down, N, F, C, a.d_hb.data(),
                            g.layers[l].w_down, nullptr);
    }
  });
  time("classifier_loss", [&] {
    ClassifierLossForward<float>(a.lnf.data(), p.output, batch.targets, C, c.vocab_size, a.logits.data(), a.lse.data());
    ClassifierLossBackward<float>(a.lnf.data(), p.output, batch.targets, C, c.vocab_size, a.lse.data(), 1.0,
                                  a.logits.data(), a.d_ln.data(), g.output);
  });
  time("forward_total", [&] { m.Forward(batch, rope, a); });
  time("backward_total", [&] { m.Backward(batch, rope, a); });
  AdamW<float> opt(m.layout(), AdamWConfig{});
  std::vector<float> params(m.parameters().begin(), m.parameters().end());
  time("grad_norm_clip_adamw", [&] {
    const double norm = GradientNorm<float>(m.gradients());
    ClipGradients<float>(m.gradients(), norm, kGradClip);
    opt.Step(params, m.gradients(), kLr);
  });
  return ms;
}

TrainStepResult RunStepCase(const TrainCase& c, const TrainBenchOptions& o) {
  ResetPeakRss();
  TrainShape cfg = Stories260KConfig();
  cfg.max_seq_len = std::max(cfg.max_seq_len, c.ctx);
  TrainModel<float> m(cfg);
  m.InitParameters(1);
  const CosSinTable table = StoriesRope(c.ctx);
  const AttentionRope rope = RopeOf(table);
  std::mt19937_64 rng(2);
  std::vector<int32_t> data(static_cast<size_t>(c.batch * (c.ctx + 1)));
  for (int32_t& t : data) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(cfg.vocab_size));
  std::vector<int32_t> inputs, targets;
  for (int64_t b = 0; b < c.batch; ++b) {
    inputs.insert(inputs.end(), data.begin() + b * (c.ctx + 1), data.begin() + b * (c.ctx + 1) + c.ctx);
    targets.insert(targets.end(), data.begin() + b * (c.ctx + 1) + 1, data.begin() + (b + 1) * (c.ctx + 1));
  }
  const TokenBatch batch{inputs, targets, c.batch, c.ctx};
  TrainerOptions opt;
  opt.schedule = {kLr, kLr, 0, 1 << 20};
  opt.grad_clip = kGradClip;
  Trainer<float> trainer(m, opt);
  TrainStepResult r;
  r.c = c;
  r.loss = trainer.Step(batch, rope).loss;  // warm-up, validated
  if (!(std::fabs(r.loss - std::log(static_cast<double>(cfg.vocab_size))) < 0.05)) {
    throw std::runtime_error(fmt::format("{}: first loss {} is not log(vocab_size) = {} (weights start at "
                                         "normal(0, 0.02))", c.name, r.loss, std::log(double(cfg.vocab_size))));
  }
  std::vector<double> seconds;
  for (int rep = 0; rep < std::max(1, o.reps); ++rep) {
    const auto t0 = Clock::now();
    trainer.Step(batch, rope);
    seconds.push_back(Seconds(t0, Clock::now()));
  }
  const double tokens = static_cast<double>(c.batch * c.ctx);
  r.tokens_per_s = tokens / *std::min_element(seconds.begin(), seconds.end());
  r.tokens_per_s_median = tokens / Median(seconds);
  r.peak_rss_mb = PeakRssMb();
  r.breakdown_ms = Breakdown(m, trainer, batch, rope, std::max(1, o.reps));
  return r;
}

// Runs bench/torch_train_baseline.py on the step cases: name -> (tokens/s, peak RSS MiB).
std::map<std::string, std::pair<double, double>> RunTorchTrain(const TrainBenchOptions& o,
                                                                const std::vector<TrainCase>& cases, int threads,
                                                                std::vector<std::string>& notes) {
  std::map<std::string, std::pair<double, double>> out;
  const TrainShape cfg = Stories260KConfig();
  nlohmann::json spec = {{"threads", threads}, {"reps", std::max(1, o.reps)}, {"cases", nlohmann::json::array()}};
  for (const TrainCase& c : cases) {
    if (c.kind != TrainBenchKind::kStep) continue;
    spec["cases"].push_back({{"name", c.name}, {"batch", c.batch}, {"ctx", c.ctx}, {"dim", cfg.dim},
                             {"hidden_dim", cfg.hidden_dim}, {"n_layers", cfg.n_layers}, {"n_heads", cfg.n_heads},
                             {"n_kv_heads", cfg.n_kv_heads}, {"vocab_size", cfg.vocab_size},
                             {"norm_eps", cfg.norm_eps}, {"lr", kLr}, {"grad_clip", kGradClip}});
  }
  if (spec["cases"].empty()) return out;
  const std::string script =
      o.torch_script.empty() ? std::string(POSENC_BENCH_DIR) + "/torch_train_baseline.py" : o.torch_script;
  const nlohmann::json answer = RunPythonJson(o.python, script, spec, "torch train baseline", notes);
  if (answer.is_null()) return out;
  notes.push_back(fmt::format("torch: PyTorch {} with {} threads", answer.value("torch", std::string("?")),
                              answer.value("threads", 0)));
  for (const auto& r : answer["results"]) {
    out[r["name"].get<std::string>()] = {r["tokens_per_s"].get<double>(), r["peak_rss_mb"].get<double>()};
  }
  for (const auto& e : answer["errors"]) notes.push_back("torch: " + e.get<std::string>());
  return out;
}

}  // namespace

std::vector<TrainCase> DefaultTrainCases(const std::string& filter) {
  std::vector<TrainCase> all;
  for (int64_t ctx : {512, 2048}) all.push_back({fmt::format("train_step_L{}", ctx), TrainBenchKind::kStep, 8, ctx});
  for (int64_t ctx : {512, 2048}) {
    all.push_back({fmt::format("train_attention_L{}", ctx), TrainBenchKind::kAttention, 8, ctx});
  }
  std::vector<TrainCase> out;
  for (const TrainCase& c : all) {
    if (MatchesFilter(c.name, filter)) out.push_back(c);
  }
  return out;
}

TrainBenchReport RunTrainBench(const TrainBenchOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  TrainBenchReport rep;
  const std::vector<TrainCase> cases = DefaultTrainCases(o.filter);
  if (cases.empty()) return rep;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(std::max(1, o.threads));
  rep.threads = omp_get_max_threads();
  rep.cpu = fmt::format("{} ({} hardware threads), Highway target {}", CpuModel(), std::thread::hardware_concurrency(),
                        kernels::TrainKernelTargetName());
  rep.load_average_start = LoadAverage();
  for (const TrainCase& c : cases) {
    log(fmt::format("{} (batch {}, {} threads)...", c.name, c.batch, rep.threads));
    if (c.kind == TrainBenchKind::kStep) {
      rep.steps.push_back(RunStepCase(c, o));
    } else {
      rep.attention.push_back(RunAttentionCase(c, o));
    }
  }
  omp_set_num_threads(saved_threads);
  if (o.torch && !rep.steps.empty()) {
    log("PyTorch training baseline (" + o.python + ")...");
    const auto torch = RunTorchTrain(o, cases, rep.threads, rep.notes);
    for (TrainStepResult& r : rep.steps) {
      const auto it = torch.find(r.c.name);
      if (it == torch.end()) continue;
      r.baselines["torch"] = it->second.first;
      r.baseline_rss_mb["torch"] = it->second.second;
    }
  } else if (!o.torch) {
    rep.notes.push_back("torch baseline not run (--no-torch)");
  }
  rep.notes.push_back("peak_rss_mb: the process's VmHWM over the case, reset before it (/proc/self/clear_refs); torch's "
                      "counts its Python process the same way");
  rep.load_average_end = LoadAverage();
  return rep;
}

nlohmann::json TrainResultsJson(const TrainBenchReport& rep) {
  nlohmann::json results = nlohmann::json::array();
  for (const TrainStepResult& r : rep.steps) {
    nlohmann::json e = {{"kernel", "train_step"},
                        {"case", r.c.name},
                        {"shape", {r.c.batch, r.c.ctx}},
                        {"tokens_per_s", r.tokens_per_s},
                        {"tokens_per_s_median", r.tokens_per_s_median},
                        {"baselines", r.baselines},
                        {"peak_rss_mb", r.peak_rss_mb},
                        {"baseline_peak_rss_mb", r.baseline_rss_mb},
                        {"threads", rep.threads},
                        {"loss", r.loss},
                        {"breakdown_ms", r.breakdown_ms}};
    e["ratios"] = nlohmann::json::object();
    for (const auto& [name, tps] : r.baselines) e["ratios"][name] = r.tokens_per_s / tps;
    results.push_back(e);
  }
  for (const TrainAttentionResult& r : rep.attention) {
    results.push_back({{"kernel", "train_attention"},
                       {"case", r.c.name},
                       {"shape", {r.c.batch, r.c.ctx}},
                       {"recompute_ms", r.recompute_ms},
                       {"stored_ms", r.stored_ms},
                       {"stored_mb_per_step", r.stored_mb_per_step},
                       {"max_rel_diff", r.max_rel_diff},
                       {"threads", rep.threads}});
  }
  return results;
}

std::string FormatTrainReport(const TrainBenchReport& rep) {
  std::string s;
  if (rep.steps.empty() && rep.attention.empty()) return s;
  s += fmt::format("\ntraining (stories260K shape; load average at start / end: {:.2f} / {:.2f})\ncpu: {}\nthreads: {}\n",
                   rep.load_average_start, rep.load_average_end, rep.cpu, rep.threads);
  if (!rep.steps.empty()) {
    s += fmt::format("{:<22} {:>12} {:>12} {:>12} {:>9} {:>10} {:>10}\n", "case", "tokens/s", "median", "torch",
                     "x torch", "RSS MiB", "torch RSS");
    for (const TrainStepResult& r : rep.steps) {
      const auto t = r.baselines.find("torch");
      const auto rss = r.baseline_rss_mb.find("torch");
      s += fmt::format("{:<22} {:>12.0f} {:>12.0f} {:>12} {:>9} {:>10.0f} {:>10}\n", r.c.name, r.tokens_per_s,
                       r.tokens_per_s_median, t == r.baselines.end() ? "-" : fmt::format("{:.0f}", t->second),
                       t == r.baselines.end() ? "-" : fmt::format("{:.2f}", r.tokens_per_s / t->second), r.peak_rss_mb,
                       rss == r.baseline_rss_mb.end() ? "-" : fmt::format("{:.0f}", rss->second));
    }
    for (const TrainStepResult& r : rep.steps) {
      s += fmt::format("  {} breakdown (ms, forward + backward of all blocks, best of reps):", r.c.name);
      for (const auto& [name, ms] : r.breakdown_ms) s += fmt::format(" {} {:.1f};", name, ms);
      s += "\n";
    }
  }
  if (!rep.attention.empty()) {
    s += fmt::format("{:<22} {:>14} {:>14} {:>10} {:>16}\n", "attention (1 layer)", "recompute ms", "keep P ms",
                     "x keep", "P MiB per step");
    for (const TrainAttentionResult& r : rep.attention) {
      s += fmt::format("{:<22} {:>14.1f} {:>14.1f} {:>10.2f} {:>16.0f}\n", r.c.name, r.recompute_ms, r.stored_ms,
                       r.stored_ms / r.recompute_ms, r.stored_mb_per_step);
    }
  }
  for (const std::string& n : rep.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace posenc::bench
