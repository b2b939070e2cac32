// Shared flags and run of the training commands: see train_flags.h.
#include "train_flags.h"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include "posenc/core/errors.h"
#include "posenc/eval/data_files.h"
#include "posenc/model/methods.h"
#include "posenc/report/train_report.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR ""
#endif

namespace posenc::cli {
namespace {

std::atomic<bool> g_stop{false};
std::atomic<int> g_signal{0};

extern "C" void OnInterrupt(int sig) {
  g_signal.store(sig);
  g_stop.store(true);
}

}  // namespace

void AddTrainRunFlags(CLI::App* cmd, TrainRunOptions& o, bool* quiet) {
  cmd->add_option("--text", o.text_path,
                  "UTF-8 training text; lines '<|endoftext|>' split documents; the first 80% of the documents "
                  "train, the rest are held out (default: data/text/tinystories_val_stories.txt)");
  cmd->add_option("--holdout", o.held_out_path, "held-out text (then all of --text trains)");
  cmd->add_option("--tokenizer", o.tokenizer_path, "tokenizer (default: the model's own, or data/tok512.bin)");
  AddParseSpecialFlag(cmd, &o.parse_special, "llama-finetune tokenizes");
  cmd->add_option("--ctx", o.ctx, "training window L, tokens")->required();
  cmd->add_option("--steps", o.steps, "optimizer steps (in all, counting those of a resumed run)")->required();
  cmd->add_option("--batch", o.batch, "windows per step")->capture_default_str();
  cmd->add_option("--lr", o.lr, "peak learning rate (AdamW)")->capture_default_str();
  cmd->add_option("--warmup", o.warmup, "warm-up steps (default: min(100, steps / 10)); cosine decay after");
  cmd->add_option("--weight-decay", o.weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  cmd->add_option("--grad-clip", o.grad_clip, "max global gradient norm (0: none)")->capture_default_str();
  cmd->add_option("--seed", o.seed, "data order and initial weights")->capture_default_str();
  cmd->add_option("--eval-ctx", o.eval_ctx, "held-out perplexity at these window lengths (default: --ctx)")
      ->delimiter(',');
  cmd->add_option("--eval-at", o.eval_at,
                  "evaluate (and write a checkpoint <out-stem>.step<N><ext>) after these steps; 0 = before "
                  "training (default: the last step)")
      ->delimiter(',');
  cmd->add_option("--eval-tokens", o.eval_tokens, "held-out predictions per evaluation (whole windows)")
      ->capture_default_str();
  cmd->add_option("--out", o.out_path,
                  "checkpoint: .bin = llama2.c (the method is recorded in <out>.json), otherwise GGUF F32 "
                  "(method in rope.scaling.* keys); <out>.state holds the state for --resume")
      ->required();
  cmd->add_option("--resume", o.resume_path, "continue from a <out>.state file of an earlier run");
  cmd->add_flag("--quiet", *quiet, "no progress line");
}

void RunTrainCommand(TrainRunOptions o, bool quiet, CommandMode mode) {
  ParseRopeMethod(o.method);
  if (mode == CommandMode::kParseOnly) return;
  const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
  if (o.model_path.empty() && !o.config) o.model_path = FindDataFile("stories260K.bin", dirs);
  if (o.text_path.empty()) o.text_path = FindDataFile("text/tinystories_val_stories.txt", dirs);
  if (o.tokenizer_path.empty() && (o.model_path.empty() || o.model_path.ends_with(".bin"))) {
    o.tokenizer_path = FindDataFile("tok512.bin", dirs);
  }
  const bool show = !quiet && ::isatty(::fileno(stderr)) != 0;
  g_stop.store(false);
  g_signal.store(0);
  struct sigaction sa = {};
  struct sigaction old = {}, old_term = {};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  sigaction(SIGTERM, &sa, &old_term);  // SIGTERM too: the state at the last finished step is saved
  TrainRunReport report;
  try {
    report = RunTraining(
        o,
        [&](const TrainProgress& p) {
          if (!show) return;
          fmt::print(stderr, "\rstep {}/{}  loss {:.4f}  {:.0f} tokens/s  ETA {:.0f} s   ", p.step, p.steps, p.loss,
                     p.tokens_per_s, p.eta_s);
          if (p.step == p.steps) fmt::print(stderr, "\n");
        },
        &g_stop);
  } catch (...) {
    sigaction(SIGINT, &old, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (show) fmt::print(stderr, "\n");
    throw;
  }
  sigaction(SIGINT, &old, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  if (show && report.interrupted) fmt::print(stderr, "\n");
  if (report.interrupted) {
    fmt::print("interrupted after step {}: checkpoint {}, resume with --resume {}\n", report.steps_done,
               report.checkpoints.back(), report.state_path);
  }
  fmt::print("{}", FormatTrainRunReport(report));
  // Stopped by a signal: the checkpoint and state are saved, but the run did not finish; the shell's status.
  if (report.interrupted) throw ExitStatus{128 + (g_signal.load() != 0 ? g_signal.load() : SIGINT)};
}

}  // namespace posenc::cli
