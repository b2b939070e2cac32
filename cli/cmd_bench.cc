// posenc-bench (`posenc bench` runs it): apply_rope throughput against the memory limit and the baselines, tiled causal attention with RoPE
// against OpenBLAS sgemm's FLOP rate and its baselines, the absolute-PE kernels, tokenizer encode throughput, and a
// training step against PyTorch, measured in one run. The suites live in bench/rope_suite.h, bench/attention_suite.h,
// bench/pe_suite.h and bench/tokenizer_suite.h (shared with the Google Benchmark binary posenc_gbench) and
// bench/train_suite.h.
#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "attention_suite.h"
#include "commands.h"
#include "pe_suite.h"
#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/io/output_file.h"
#include "rope_suite.h"
#include "suite_util.h"
#include "tokenizer_suite.h"
#include "train_suite.h"

namespace posenc::cli {
namespace {

struct BenchArgs {
  bench::RopeBenchOptions options;
  std::optional<std::string> json_path;  // set (even to ""): the report file was asked for
  int attention_reps = 5;
  int train_threads = 2;
  int train_reps = 3;
  bool no_torch = false;
  bool quiet = false;
};

}  // namespace

void ConfigureBenchCommand(CLI::App& app, CommandMode mode) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = &app;
  cmd->description(
      "posenc-bench (also run as `posenc bench`): time apply_rope (SIMD kernel) against a STREAM copy, OpenBLAS sgemm, the scalar path, HF's "
      "formulation in plain C++ and PyTorch's HF code, and causal attention with RoPE (tiled, online softmax) "
      "against OpenBLAS sgemm's FLOP rate, the row path and a naive L x L path, and the absolute-PE kernels "
      "(sinusoidal add, learned gather / scatter-add, SGD) against the scalar path and a plain loop, tokenizer "
      "encode throughput per family (--filter tokenize), and a training step of stories260K's shape (batch 8, ctx "
      "512 and 2048) against the same model in plain PyTorch (--filter train), all in one run; validates before "
      "timing");
  cmd->add_option("--json", args->json_path, "Also write the report as JSON to this file");
  cmd->add_option("--filter", args->options.filter,
                  "Only cases whose name contains one of these comma-separated substrings (e.g. decode, bf16, "
                  "attention_L2048, \"gather,scatter,sgd,sinusoidal\", tokenize, train)");
  cmd->add_option("--threads", args->options.threads,
                  fmt::format("OpenMP threads (default: OpenMP's default; at most {})", kMaxThreads));
  cmd->add_option("--reps", args->options.reps,
                  "Timed calls (or hot batches) per figure; the best is reported, the median kept in the JSON")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--attention-reps", args->attention_reps,
                  "Timed calls per attention variant (best reported; calls over 2 s of a baseline get 2)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--train-threads", args->train_threads,
                  "OpenMP threads of the training cases (and torch.set_num_threads of their baseline)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  cmd->add_option("--train-reps", args->train_reps, "Timed training steps per figure after one warm-up (best reported)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_flag("--no-torch", args->no_torch, "Skip the PyTorch baselines");
  cmd->add_option("--python", args->options.python, "Python with torch for the baseline")->capture_default_str();
  cmd->add_option("--torch-script", args->options.torch_script,
                  "Baseline script (default: bench/torch_rope_baseline.py of the source tree)");
  cmd->add_option("--stream-bytes", args->options.stream_bytes,
                  "Bytes per STREAM copy array (default 256 MiB, at least 1 MiB)");
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->callback([args, mode] {
    bench::RopeBenchOptions o = args->options;
    const bool kernels = !bench::DefaultRopeCases(o.filter).empty() ||
                         !bench::DefaultAttentionCases(o.filter).empty() || !bench::DefaultPeCases(o.filter).empty();
    const bool tokenizers = !bench::DefaultTokenizerCases(o.filter).empty();
    const bool training = !bench::DefaultTrainCases(o.filter).empty();
    if (!kernels && !tokenizers && !training) {
      throw ConfigError(fmt::format("--filter '{}' matches no benchmark case (comma-separated substrings of case "
                                    "names such as decode_qk, attention_L2048, gather, tokenize, train)", o.filter));
    }
    bench::ValidateSuiteSettings(o.threads, o.stream_bytes);
    if (mode == CommandMode::kParseOnly) return;
    if (args->json_path) {
      CheckRunPaths(std::vector<RunPath>{{"--torch-script", o.torch_script}},
                    std::vector<RunPath>{{"--json", *args->json_path}});
    }
    o.torch = !args->no_torch;
    if (!args->quiet) o.log = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
    nlohmann::json j = {{"results", nlohmann::json::array()}};
    if (kernels) {
      const bench::RopeBenchReport report = bench::RunRopeBench(o);
      bench::AttentionBenchOptions ao;
      ao.filter = o.filter;
      ao.threads = o.threads;
      ao.reps = args->attention_reps;
      ao.sgemm_gflops = report.sgemm_gflops;  // the same run's sgemm: pct_of_sgemm shares its denominator
      ao.sgemm_n = o.sgemm_n;
      ao.log = o.log;
      const bench::AttentionBenchReport attention = bench::RunAttentionBench(ao);
      bench::PeBenchOptions po;
      po.filter = o.filter;
      po.threads = o.threads;
      po.reps = o.reps;
      po.stream_bytes = o.stream_bytes;
      po.log = o.log;
      po.stream_copy_gbps = report.stream_copy_gbps;  // the same run's limits: pct_of_stream shares its denominator
      po.stream_copy_gbps_1thread = report.stream_copy_gbps_1thread;
      po.stream_rmw_gbps = report.stream_rmw_gbps;
      const bench::PeBenchReport pe = bench::RunPeBench(po);
      if (!report.results.empty()) fmt::print("{}", bench::FormatReport(report));
      fmt::print("{}", bench::FormatAttentionReport(attention));
      if (!pe.results.empty()) fmt::print("{}", bench::FormatPeReport(pe));
      j = bench::ToJson(report);
      for (const auto& e : bench::AttentionResultsJson(attention)) j["results"].push_back(e);
      const nlohmann::json pe_json = bench::ToJson(pe);  // a named object: its "results" must outlive the loop
      for (const auto& e : pe_json["results"]) j["results"].push_back(e);
      if (!attention.results.empty()) {
        j["attention"] = {{"sgemm_gflops_1thread", attention.sgemm_gflops_1thread},
                          {"hwy_target", attention.hwy_target},
                          {"notes", attention.notes}};
      }
    }
    if (tokenizers) {
      bench::TokenizerBenchOptions to;
      to.filter = o.filter;
      to.reps = o.reps;
      to.log = o.log;
      const bench::TokenizerBenchReport tok = bench::RunTokenizerBench(to);
      fmt::print("{}", bench::FormatTokenizerReport(tok));
      for (const auto& e : bench::TokenizerResultsJson(tok)) j["results"].push_back(e);
      j["tokenizer"] = {{"text", tok.text_path}, {"text_bytes", tok.text_bytes}, {"notes", tok.notes}};
    }
    if (training) {
      bench::TrainBenchOptions to;
      to.filter = o.filter;
      to.threads = args->train_threads;
      to.reps = args->train_reps;
      to.torch = o.torch;
      to.python = o.python;
      to.log = o.log;
      const bench::TrainBenchReport train = bench::RunTrainBench(to);
      fmt::print("{}", bench::FormatTrainReport(train));
      for (const auto& e : bench::TrainResultsJson(train)) j["results"].push_back(e);
    }
    if (args->json_path) {
      WriteFileAtomically(*args->json_path, j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
  });
}

}  // namespace posenc::cli
