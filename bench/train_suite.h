// The training benchmark suite of `posenc bench` (cli/cmd_bench.cc, through RunTrainBench): one training step
// (forward + backward + gradient clipping + AdamW) of stories260K's shape at batch 8 against a plain PyTorch model of
// the same shape run in the same `posenc bench` (bench/torch_train_baseline.py), the step's breakdown by layer, and
// the attention backward's design choice measured: recomputing the weights from the saved log-sum-exp (what the
// library does) against keeping them between forward and backward (a BLAS implementation here).
//
// Every figure of one report is measured in the same run, so ratios between them are meaningful on a shared, noisy
// machine; absolute tokens/s are not comparable across runs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace posenc::bench {

/// What a case times.
enum class TrainBenchKind {
  kStep,       // one training step of the whole model
  kAttention,  // one attention layer's forward + backward: recomputed weights vs kept weights
};

/// One timed shape: stories260K (dim 64, hidden 172, 5 layers, 8 heads, 4 kv heads, vocab 512), RoPE.
struct TrainCase {
  std::string name;  // "train_step_L512", "train_attention_L2048", ...
  TrainBenchKind kind = TrainBenchKind::kStep;
  int64_t batch = 8;
  int64_t ctx = 512;
};

/// train_step and train_attention at ctx 512 and 2048, batch 8. `filter`: comma-separated substrings of the names
/// (MatchesFilter, suite_util.h); empty: all.
std::vector<TrainCase> DefaultTrainCases(const std::string& filter = "");

struct TrainBenchOptions {
  std::string filter;
  int threads = 2;   // OpenMP threads for posenc and torch.set_num_threads for the baseline
  int reps = 3;      // timed steps (or attention calls) per figure after one warm-up; the best is reported
  bool torch = true;
  std::string python = "/usr/bin/python3";
  std::string torch_script;  // default: bench/torch_train_baseline.py of the source tree
  std::function<void(const std::string&)> log;
};

/// One train_step case.
struct TrainStepResult {
  TrainCase c;
  double tokens_per_s = 0;         // batch * ctx / best step
  double tokens_per_s_median = 0;  // from the median step
  double peak_rss_mb = 0;          // the process's VmHWM over the case (reset before it)
  double loss = 0;                 // loss of the warm-up step (validated: log(vocab_size) +- 0.05)
  std::map<std::string, double> baselines;       // "torch" -> tokens/s (best step)
  std::map<std::string, double> baseline_rss_mb;  // "torch" -> its process's VmHWM over the case
  std::map<std::string, double> breakdown_ms;    // per layer kind, forward + backward of all layers, best of reps
};

/// One train_attention case (one layer, forward + backward, best call).
struct TrainAttentionResult {
  TrainCase c;
  double recompute_ms = 0;       // SelfAttentionForward + SelfAttentionBackward (the library)
  double stored_ms = 0;          // the same with the weights kept: forward writes them, backward reads them
  double stored_mb_per_step = 0; // what keeping them costs per training step: batch * heads * ctx (ctx+1) / 2 * 4 B
                                 // * n_layers
  double max_rel_diff = 0;       // validation: max |recompute - stored| / max |stored| over out and dqkv
};

struct TrainBenchReport {
  int threads = 0;
  std::string cpu;
  std::vector<TrainStepResult> steps;
  std::vector<TrainAttentionResult> attention;
  std::vector<std::string> notes;
  double load_average_start = -1;
  double load_average_end = -1;
};

/// Validates (the warm-up step's loss; the two attention designs against each other), then times every case.
/// Errors: std::runtime_error naming the case if a validation fails.
TrainBenchReport RunTrainBench(const TrainBenchOptions& options);

/// One `results` entry per case: train_step {"kernel": "train_step", "shape": [batch, ctx], "tokens_per_s",
/// "baselines": {"torch": tokens/s}, "peak_rss_mb"} plus tokens_per_s_median, ratios {"torch"},
/// baseline_peak_rss_mb, loss, breakdown_ms; train_attention {"kernel": "train_attention", "shape": [batch, ctx],
/// "recompute_ms", "stored_ms", "stored_mb_per_step", "max_rel_diff"}.
nlohmann::json TrainResultsJson(const TrainBenchReport& report);

/// A fixed-width text table of the report.
std::string FormatTrainReport(const TrainBenchReport& report);

}  // namespace posenc::bench
