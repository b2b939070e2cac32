// posenc bench: apply_rope throughput against the memory limit and the baselines, measured in one run
// (the suite lives in bench/rope_suite.h, shared with the Google Benchmark binary posenc_bench).
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "commands.h"
#include "posenc/core/errors.h"
#include "rope_suite.h"

namespace posenc::cli {
namespace {

struct BenchArgs {
  bench::RopeBenchOptions options;
  std::string json_path;
  bool no_torch = false;
  bool quiet = false;
};

}  // namespace

void RegisterBenchCommand(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Time apply_rope (SIMD kernel) against a STREAM copy, OpenBLAS sgemm, the scalar path, HF's "
      "formulation in plain C++ and PyTorch's HF code, all in one run; validates before timing");
  cmd->add_option("--json", args->json_path, "Also write the report as JSON to this file");
  cmd->add_option("--filter", args->options.filter, "Only cases whose name contains this (e.g. decode, bf16)");
  cmd->add_option("--threads", args->options.threads, "OpenMP threads (default: OpenMP's default)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reps", args->options.reps,
                  "Timed calls (or hot batches) per figure; the best is reported, the median kept in the JSON")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--no-torch", args->no_torch, "Skip the PyTorch baseline");
  cmd->add_option("--python", args->options.python, "Python with torch for the baseline")->capture_default_str();
  cmd->add_option("--torch-script", args->options.torch_script,
                  "Baseline script (default: bench/torch_rope_baseline.py of the source tree)");
  cmd->add_option("--stream-bytes", args->options.stream_bytes, "Bytes per STREAM copy array (default 256 MiB)");
  cmd->add_flag("--quiet", args->quiet, "No progress lines on stderr");
  cmd->callback([args] {
    bench::RopeBenchOptions o = args->options;
    o.torch = !args->no_torch;
    if (!args->quiet) o.log = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
    const bench::RopeBenchReport report = bench::RunRopeBench(o);
    fmt::print("{}", bench::FormatReport(report));
    if (!args->json_path.empty()) {
      std::ofstream out(args->json_path);
      if (!out) throw IoError(fmt::format("cannot write --json file {}", args->json_path));
      out << bench::ToJson(report).dump(2) << "\n";
      if (!out) throw IoError(fmt::format("error writing --json file {}", args->json_path));
    }
  });
}

}  // namespace posenc::cli
