#include "posenc/train/run.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/eval/documents.h"
#include "posenc/model/methods.h"
#include "posenc/formats/gguf.h"
#include "posenc/model/loader.h"
#include "posenc/io/output_file.h"
#include "posenc/tokenizer/load.h"
#include "posenc/train/checkpoint.h"
#include "posenc/train/data.h"
#include "posenc/train/trainer.h"

namespace posenc {
namespace {


// The RoPE of one window length: the method's tables, or none for absolute / no positions.
struct RunRope {
  std::unique_ptr<MethodRope> method;
  AttentionRope view() const {
    if (!method) return {};
    const size_t t = static_cast<size_t>(method->UniformTable());
    return {View(method->tables[t]), RopeLayout::kInterleaved, method->pre_rotations[t].get(),
            static_cast<double>(method->multipliers[t])};
  }
};

RunRope BuildRunRope(const ModelConfig& c, RopeMethod method, double factor, int64_t ctx) {
  RunRope r;
  if (TrainPositionEncoding(c) != PositionEncoding::kRope) return r;
  MethodOptions mo;
  if (method != RopeMethod::kNone) mo.factor = factor;
  r.method = std::make_unique<MethodRope>(BuildMethodRope(method, ctx, c, mo));
  return r;
}

std::string WithStep(const std::string& path, int64_t step) {
  const size_t slash = path.find_last_of('/');
  const size_t dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) {
    return fmt::format("{}.step{}", path, step);
  }
  return fmt::format("{}.step{}{}", path.substr(0, dot), step, path.substr(dot));
}

// Every input and output of the run, checked together (CheckRunPaths). The one exception: <out>.state may be the
// resume file, so a run continues its own state in place (the usual `--resume x.bin.state --out x.bin`); it is
// replaced only by the continued state, atomically.
void CheckTrainRunPaths(const TrainRunOptions& o, const std::vector<int64_t>& eval_at, const std::string& state_path,
                        const std::string& json_path) {
  std::vector<RunPath> inputs = {{"`model_path`", o.model_path},         {"`config_path`", o.config_path},
                                 {"`text_path`", o.text_path},           {"`held_out_path`", o.held_out_path},
                                 {"`tokenizer_path`", o.tokenizer_path}};
  std::vector<RunPath> outputs = {{"`out_path`", o.out_path}, {"`out_path` (its .json report)", json_path}};
  for (int64_t s : eval_at) {
    if (s > 0 && s < o.steps) {
      outputs.push_back({fmt::format("`out_path` (its checkpoint after step {})", s), WithStep(o.out_path, s)});
    }
  }
  const RunPath resume{"`resume_path`", o.resume_path};
  CheckRunPaths(std::span<const RunPath>(&resume, 1), outputs);  // every output but the state
  outputs.push_back({"`out_path` (its .state file)", state_path});
  CheckRunPaths(inputs, outputs);
}

bool IsLlama2cPath(const std::string& path) { return path.size() >= 4 && path.substr(path.size() - 4) == ".bin"; }

// exp(mean NLL) over whole windows of ctx + 1 held-out tokens, from the start of the held-out stream.
HeldOutPoint EvalHeldOut(const TrainModel<float>& model, Activations<float>& acts, const std::vector<int32_t>& tokens,
                         int64_t ctx, const AttentionRope& rope, int64_t eval_tokens, int64_t step) {
  HeldOutPoint p;
  p.step = step;
  p.ctx = ctx;
  const int64_t available = (static_cast<int64_t>(tokens.size()) - 1) / ctx;
  const int64_t windows = std::min(available, std::max<int64_t>(1, eval_tokens / ctx));
  double nll = 0;
  for (int64_t w = 0; w < windows; ++w) {
    const std::span<const int32_t> in(tokens.data() + w * ctx, static_cast<size_t>(ctx));
    const std::span<const int32_t> tg(tokens.data() + w * ctx + 1, static_cast<size_t>(ctx));
    nll += model.Forward(TokenBatch{in, tg, 1, ctx}, rope, acts) * static_cast<double>(ctx);
  }
  p.tokens = windows * ctx;
  p.ppl = std::exp(nll / static_cast<double>(p.tokens));
  return p;
}

std::string ShapeLine(const ModelConfig& c) {
  const PositionEncoding pe = TrainPositionEncoding(c);
  return fmt::format("dim {}, ffn {}, {} layers, {} heads x head_dim {}, {} kv heads, vocab {}, positions {}{}",
                     c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.head_dim, c.n_kv_heads, c.vocab_size,
                     PositionEncodingName(pe),
                     pe == PositionEncoding::kLearned ? fmt::format(" ({} rows)", c.n_positions) : std::string());
}

}  // namespace

TrainRunReport RunTraining(const TrainRunOptions& o, const std::function<void(const TrainProgress&)>& progress,
                           const std::atomic<bool>* stop) {
  const auto t0 = std::chrono::steady_clock::now();
  if (o.steps < 1) throw ConfigError(fmt::format("`steps` must be >= 1, got {}", o.steps));
  if (o.batch < 1) throw ConfigError(fmt::format("`batch` must be >= 1, got {}", o.batch));
  if (o.ctx < 1) throw ConfigError(fmt::format("`ctx` must be >= 1, got {}", o.ctx));
  if (o.eval_tokens < 1) throw ConfigError(fmt::format("`eval_tokens` must be >= 1, got {}", o.eval_tokens));
  if (o.factor && !(*o.factor >= 1.0 && std::isfinite(*o.factor))) {
    throw ConfigError(fmt::format("`factor` must be a finite number >= 1, got {}", *o.factor));
  }
  if (o.warmup && *o.warmup < 0) throw ConfigError(fmt::format("`warmup` must be >= 0, got {}", *o.warmup));
  if (o.out_path.empty()) throw ConfigError("`out_path` is required");
  const RopeMethod method = ParseRopeMethod(o.method);
  std::vector<int64_t> eval_ctx = o.eval_ctx.empty() ? std::vector<int64_t>{o.ctx} : o.eval_ctx;
  std::vector<int64_t> eval_at = o.eval_at.empty() ? std::vector<int64_t>{o.steps} : o.eval_at;
  for (int64_t L : eval_ctx) {
    if (L < 1) throw ConfigError(fmt::format("`eval_ctx` values must be >= 1, got {}", L));
  }
  for (int64_t s : eval_at) {
    if (s < 0 || s > o.steps) {
      throw ConfigError(fmt::format("`eval_at` values must be in [0, `steps` {}], got {}", o.steps, s));
    }
  }
  std::sort(eval_at.begin(), eval_at.end());
  eval_at.erase(std::unique(eval_at.begin(), eval_at.end()), eval_at.end());

  TrainRunReport rep;
  rep.state_path = o.out_path + ".state";
  rep.json_path = o.out_path + ".json";
  // Outputs first: a run never trains for a checkpoint it cannot write, and no output replaces an input.
  CheckTrainRunPaths(o, eval_at, rep.state_path, rep.json_path);

  // The model and its tokenizer.
  int64_t max_eval = *std::max_element(eval_ctx.begin(), eval_ctx.end());
  std::unique_ptr<TrainModel<float>> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::optional<GgufFile> gguf_source;
  int64_t original_ctx = o.ctx;
  std::string model_key;  // the shape as stated: identifies the model in its training state
  if (!o.model_path.empty()) {
    const ModelFile mf = LoadModelFile(o.model_path);
    original_ctx = mf.config.train_ctx;
    const TrainShape shape = TrainConfigFromModelFile(mf, std::max(o.ctx, max_eval));
    model_key = TrainModelKey(shape);
    model = std::make_unique<TrainModel<float>>(ToModelConfig(shape, original_ctx));
    LoadParameters(mf, *model);
    rep.model = o.model_path;
    if (mf.format == ModelFormat::kGguf) gguf_source = GgufFile::Open(o.model_path);
    tokenizer = LoadModelTokenizer(o.model_path, o.tokenizer_path, o.parse_special);
  } else {
    if (!o.config) throw ConfigError("a run needs a model file (`model_path`) or a model config (`config`)");
    if (o.tokenizer_path.empty()) throw ConfigError("`tokenizer_path` is required for a new model");
    ValidateTrainShape(*o.config);
    model_key = TrainModelKey(*o.config);
    model = std::make_unique<TrainModel<float>>(ToModelConfig(*o.config, original_ctx));
    model->InitParameters(o.seed);
    rep.model = "new model";
    TokenizerLoadOptions tlo;
    tlo.llama2c_vocab_size = o.config->vocab_size;
    tlo.parse_special = o.parse_special;
    tokenizer = LoadTokenizer(o.tokenizer_path, tlo);
  }
  rep.notes = tokenizer->notes();
  rep.parse_special = o.parse_special;
  const ModelConfig& cfg = model->config();
  const PositionEncoding position_encoding = model->position_encoding();
  if (IsLlama2cPath(o.out_path)) CheckLlama2cCheckpoint(cfg, o.out_path);  // before the first step
  if (tokenizer->vocab_size() > cfg.vocab_size) {
    throw ConfigError(fmt::format("the tokenizer has {} tokens, the model's vocab_size is {}",
                                  tokenizer->vocab_size(), cfg.vocab_size));
  }
  if (position_encoding != PositionEncoding::kRope && method != RopeMethod::kNone) {
    throw ConfigError(fmt::format("`method` {} needs RoPE; this model's position_encoding is {}", o.method,
                                  PositionEncodingName(position_encoding)));
  }
  if (position_encoding != PositionEncoding::kRope && position_encoding != PositionEncoding::kNone &&
      o.ctx > cfg.n_positions) {
    throw ConfigError(fmt::format("`ctx` {} is longer than the model's max_seq_len {} (its {} position table)",
                                  o.ctx, cfg.n_positions, PositionEncodingName(position_encoding)));
  }
  const double factor =
      o.factor ? *o.factor : std::max(1.0, static_cast<double>(o.ctx) / static_cast<double>(original_ctx));
  rep.shape = ShapeLine(cfg);
  rep.method = std::string(RopeMethodName(method));
  rep.factor = method == RopeMethod::kNone ? 1.0 : factor;
  rep.original_ctx = original_ctx;
  rep.ctx = o.ctx;
  rep.batch = o.batch;
  rep.steps = o.steps;

  // Text: split, tokenized; sizes checked before the first step.
  const std::string text = ReadTextFile(o.text_path);
  const std::string held = o.held_out_path.empty() ? std::string() : ReadTextFile(o.held_out_path);
  if (!o.held_out_path.empty() && held.find_first_not_of(" \t\r\n") == std::string::npos) {
    throw RangeError(fmt::format("`held_out_path` {} holds no text ({} bytes); give a held-out text, or leave "
                                 "`held_out_path` empty to hold out the last 20% of `text_path`'s documents",
                                 o.held_out_path, held.size()));
  }
  const TrainText data = SplitTrainText(text, held, *tokenizer);
  rep.split_rule = data.rule;
  // Absolute, so that an eval from another directory finds the texts (eval/training_record.h).
  rep.text_path = std::filesystem::absolute(o.text_path).lexically_normal().string();
  rep.held_out_path =
      o.held_out_path.empty() ? "" : std::filesystem::absolute(o.held_out_path).lexically_normal().string();
  rep.n_documents = data.n_documents;
  rep.n_train_documents = data.n_train_documents;
  rep.text_fingerprint = FingerprintHex(text);
  rep.train_tokens = static_cast<int64_t>(data.train.size());
  rep.held_out_tokens = static_cast<int64_t>(data.held_out.size());
  if (rep.train_tokens < o.ctx + 1) {
    throw RangeError(fmt::format("`ctx` {} needs at least {} training tokens; the training text ({}) has {}", o.ctx,
                                 o.ctx + 1, data.rule, rep.train_tokens));
  }
  if (o.batch * (o.ctx + 1) > rep.train_tokens) {
    throw RangeError(fmt::format("`batch` {} windows of `ctx` {} need {} distinct training tokens; the training "
                                 "text has {}", o.batch, o.ctx, o.batch * (o.ctx + 1), rep.train_tokens));
  }
  for (int64_t L : eval_ctx) {
    if (rep.held_out_tokens < L + 1) {
      throw RangeError(fmt::format("held-out perplexity at {} tokens needs {} held-out tokens; {} gives {}", L, L + 1,
                                   data.rule, rep.held_out_tokens));
    }
  }

  TrainerOptions to;
  to.adamw.weight_decay = o.weight_decay;
  to.schedule.max_lr = o.lr;
  to.schedule.min_lr = o.lr * o.min_lr_fraction;
  to.schedule.warmup_steps = o.warmup ? std::min(*o.warmup, o.steps) : std::min<int64_t>(100, o.steps / 10);
  to.schedule.total_steps = o.steps;
  to.grad_clip = o.grad_clip;
  Trainer<float> trainer(*model, to);
  // The step's products run on OpenBLAS's threads, each with its own work buffer.
  RequireBlasWorkspace(BlasThreads(), fmt::format("training with {} BLAS thread{}", BlasThreads(),
                                                  BlasThreads() == 1 ? "" : "s"),
                       "OPENBLAS_NUM_THREADS=1");
  const TrainStateInfo info_base{
      0, o.seed, model_key,
      {rep.method, rep.factor, o.ctx, o.batch, o.lr, o.weight_decay, o.grad_clip, o.parse_special,
       fmt::format("text {}, held out: {}", rep.text_fingerprint,
                   o.held_out_path.empty() ? std::string("the last 20% of its documents") : FingerprintHex(held))}};
  if (!o.resume_path.empty()) {
    const TrainState st = ReadTrainState(o.resume_path, *model, model_key);
    CheckResumeSettings(o.resume_path, st.info, info_base);
    if (st.info.step >= o.steps) {
      throw ConfigError(fmt::format("`resume_path` {} has already run {} steps; `steps` {} leaves nothing to do",
                                    o.resume_path, st.info.step, o.steps));
    }
    trainer.Restore(st.info.step, st.m, st.v);
  }
  rep.first_step = trainer.step();

  const RunRope train_rope = BuildRunRope(cfg, method, factor, o.ctx);
  const CheckpointRope ck_rope{rep.method, rep.factor, original_ctx, o.ctx,
                               cfg.layers.front().rope_params.rope_theta};
  auto write_checkpoint = [&](const std::string& path) {
    if (IsLlama2cPath(path)) {
      WriteLlama2cCheckpoint(*model, ck_rope, path);
    } else {
      WriteGgufCheckpoint(*model, ck_rope, gguf_source ? &*gguf_source : nullptr, path);
    }
    rep.checkpoints.push_back(path);
  };
  auto write_state = [&] {
    TrainStateInfo info = info_base;
    info.step = trainer.step();
    WriteTrainState(*model, trainer.optimizer(), info, rep.state_path);
  };
  auto evaluate = [&](int64_t step) {
    for (int64_t L : eval_ctx) {
      if (position_encoding == PositionEncoding::kLearned && L > cfg.n_positions) {
        HeldOutPoint p;
        p.step = step;
        p.ctx = L;
        p.ppl = std::numeric_limits<double>::quiet_NaN();
        p.error = fmt::format("error: the learned table has {} rows, position {} has none", cfg.n_positions,
                              cfg.n_positions);
        rep.held_out.push_back(p);
        continue;
      }
      const RunRope r = BuildRunRope(cfg, method, factor, L);
      rep.held_out.push_back(EvalHeldOut(*model, trainer.activations(), data.held_out, L, r.view(), o.eval_tokens,
                                         step));
    }
  };
  auto wants = [&](int64_t step) { return std::binary_search(eval_at.begin(), eval_at.end(), step); };

  if (rep.first_step == 0 && wants(0)) evaluate(0);
  std::vector<int32_t> inputs, targets;
  const auto loop_start = std::chrono::steady_clock::now();
  int64_t done_here = 0;
  for (int64_t step = rep.first_step; step < o.steps; ++step) {
    SampleWindows(data.train, o.batch, o.ctx, o.seed, step, inputs, targets);
    StepResult r;
    try {
      r = trainer.Step(TokenBatch{inputs, targets, o.batch, o.ctx}, train_rope.view());
    } catch (const NumericError& e) {
      write_state();
      throw NumericError(fmt::format("{}; the weights of the last good step ({}) are saved in {}", e.what(),
                                     trainer.step(), rep.state_path));
    }
    rep.losses.push_back(r.loss);
    ++done_here;
    const int64_t finished = step + 1;
    if (progress) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - loop_start).count();
      TrainProgress p;
      p.step = finished;
      p.steps = o.steps;
      p.loss = r.loss;
      p.tokens_per_s = secs > 0 ? static_cast<double>(done_here * o.batch * o.ctx) / secs : 0;
      p.eta_s = done_here > 0 ? secs / static_cast<double>(done_here) * static_cast<double>(o.steps - finished) : 0;
      progress(p);
    }
    if (wants(finished)) {
      evaluate(finished);
      if (finished < o.steps) {
        write_checkpoint(WithStep(o.out_path, finished));
        rep.steps_done = finished;  // the report so far: a long run's early points survive a later failure
        WriteFileAtomically(rep.json_path, TrainRunReportJson(rep) + "\n");
      }
    }
    if (stop != nullptr && stop->load() && finished < o.steps) {
      rep.interrupted = true;
      break;
    }
  }
  rep.steps_done = trainer.step();
  write_checkpoint(o.out_path);
  write_state();
  rep.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  WriteFileAtomically(rep.json_path, TrainRunReportJson(rep) + "\n");
  return rep;
}

std::string TrainRunReportJson(const TrainRunReport& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["shape"] = r.shape;
  j["notes"] = r.notes;
  j["parse_special"] = r.parse_special;
  j["text"] = r.text_path;
  j["held_out_text"] = r.held_out_path.empty() ? nlohmann::json() : nlohmann::json(r.held_out_path);
  j["split"] = {{"rule", r.split_rule},           {"n_documents", r.n_documents},
                {"n_train_documents", r.n_train_documents}, {"text_fingerprint", r.text_fingerprint},
                {"train_tokens", r.train_tokens},
                {"held_out_tokens", r.held_out_tokens}};
  j["rope"] = {{"method", r.method}, {"factor", r.factor}, {"original_max_position_embeddings", r.original_ctx}};
  j["ctx"] = r.ctx;
  j["batch"] = r.batch;
  j["steps"] = r.steps;
  j["first_step"] = r.first_step;
  j["steps_done"] = r.steps_done;
  j["interrupted"] = r.interrupted;
  j["losses"] = r.losses;
  nlohmann::json rows = nlohmann::json::array();
  for (const HeldOutPoint& p : r.held_out) {
    nlohmann::json row = {{"step", p.step}, {"ctx", p.ctx}, {"tokens", p.tokens}};
    if (p.error.empty()) {
      row["ppl"] = p.ppl;
    } else {
      row["ppl"] = nullptr;
      row["error"] = p.error;
    }
    rows.push_back(row);
  }
  j["held_out"] = rows;
  j["checkpoints"] = r.checkpoints;
  j["state"] = r.state_path;
  j["seconds"] = r.seconds;
  return j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace);  // non-UTF-8 path bytes: U+FFFD
}

}  // namespace posenc
