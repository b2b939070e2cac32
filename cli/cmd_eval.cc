// posenc eval: perplexity of a Llama-family model past its training length, for every RoPE extension method.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "method_flags.h"
#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/dist/mpi_support.h"
#include "posenc/eval/data_files.h"
#include "posenc/eval/evaluate.h"
#include "posenc/model/loader.h"
#include "posenc/io/output_file.h"
#include "posenc/report/eval_plot.h"
#include "posenc/report/eval_report.h"
#include "posenc/report/eval_stream.h"
#include "posenc/tokenizer/tokenize.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR ""
#endif

namespace posenc::cli {
namespace {

std::atomic<bool> g_interrupted{false};  // set by SIGINT while an eval runs
extern "C" void OnEvalInterrupt(int) { g_interrupted = true; }

struct EvalFlags {
  std::string model, tokenizer, text;
  bool no_training_report = false;
  std::vector<int64_t> ctx = {256, 512, 1024, 2048};
  std::vector<std::string> methods = {"none", "linear", "ntk", "dynamic", "dynamic-hf", "yarn"};
  std::string tokens = "16384";  // N or "all"
  std::string protocol = "posenc";
  int64_t stride = 256;
  std::string average = "windows";
  std::optional<int64_t> chunks;
  int64_t min_doc_tokens = 0;
  std::string baseline = "none";
  std::string resume;
  std::string kl_baseline, save_logits;
  std::optional<int64_t> train_ctx;
  std::string weights = "auto";
  std::string compute = "f32";
  int threads = 0;
  bool no_reuse = false;
  std::string add_bos = "auto";
  bool allow_unused_tensors = false;
  bool parse_special = false;
  bool context_parallel = false;
  std::optional<std::string> context_split;  // default zigzag
  std::optional<double> rank_timeout;
  std::optional<std::string> json, csv, plot;  // set (even to ""): the output was asked for
  MethodFlags method;
};

// A one-line progress bar on stderr, redrawn at most every 100 ms; silent unless stderr is a terminal.
class ProgressBar {
 public:
  explicit ProgressBar(bool wanted)
      : enabled_(wanted && ::isatty(::fileno(stderr)) != 0), start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { Clear(); }
  // Erases the bar (before a table line is printed); the next Update draws it again.
  void Clear() {
    if (drawn_) fmt::print(stderr, "\r{:80}\r", "");
    drawn_ = false;
  }
  void Update(int64_t done, int64_t total) {
    if (!enabled_) return;
    const auto now = std::chrono::steady_clock::now();
    if (done < total && now - last_ < std::chrono::milliseconds(100)) return;
    if (now - start_ < std::chrono::seconds(1) && done < total) return;  // short runs draw nothing
    last_ = now;
    drawn_ = true;
    const int width = 40;
    const int filled = total > 0 ? static_cast<int>(width * done / total) : width;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double eta = done > 0 ? elapsed * static_cast<double>(total - done) / static_cast<double>(done) : 0.0;
    fmt::print(stderr, "\r[{}{}] {:3d}% windows {}/{} {:.1f}s, ETA {:.0f}s", std::string(filled, '#'),
               std::string(width - filled, '.'), total > 0 ? static_cast<int>(100 * done / total) : 100, done,
               total, elapsed, eta);
    std::fflush(stderr);
  }

 private:
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

void RunEvalCommand(const EvalFlags& f, CommandMode mode, const Ranks* ranks) {
  Communicator* const comm = ranks != nullptr ? ranks->comm : nullptr;
  EvalOptions o;
  o.context_parallel = f.context_parallel;
  if (f.context_split) {
    if (!f.context_parallel) {
      throw ConfigError(fmt::format("--context-split {} applies only with --context-parallel", *f.context_split));
    }
    try {
      o.context_split = ParseContextSplit(*f.context_split);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("--context-split: {}", e.what()));
    }
  }
  if (f.rank_timeout && !(std::isfinite(*f.rank_timeout) && *f.rank_timeout > 0)) {
    throw ConfigError(fmt::format("--rank-timeout must be a positive number of seconds, got {}", *f.rank_timeout));
  }
  o.ctx = f.ctx;
  o.methods.clear();
  for (const std::string& name : f.methods) o.methods.push_back(ParseRopeMethod(name));
  if (f.tokens == "all") {
    o.all_tokens = true;
  } else {
    try {
      size_t used = 0;
      o.n_pred = std::stoll(f.tokens, &used);
      if (used != f.tokens.size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      throw ConfigError(fmt::format("--tokens must be a number of tokens or 'all', got '{}'", f.tokens));
    }
  }
  o.protocol.protocol = ParseEvalProtocol(f.protocol);
  o.protocol.stride = f.stride;
  o.protocol.average = ParseWindowAverage(f.average);
  o.protocol.chunks = f.chunks;
  o.protocol.min_doc_tokens = f.min_doc_tokens;
  if (!f.kl_baseline.empty()) {
    try {
      o.kl_base_method = ParseRopeMethod(f.kl_baseline);
    } catch (const ConfigError&) {
      o.kl_base_file = f.kl_baseline;  // not a method's name: a file --save-logits wrote
    }
  }
  o.save_logits = f.save_logits;
  if (f.baseline == "-") {
    o.baseline.reset();
  } else {
    o.baseline = ParseRopeMethod(f.baseline);
  }
  o.train_ctx = f.train_ctx;
  o.weights = ParseWeightStorage(f.weights);
  o.compute = ParseComputePath(f.compute);
  o.threads = f.threads;
  o.reuse_identical_rows = !f.no_reuse;
  o.load.allow_unused_tensors = f.allow_unused_tensors;
  o.parse_special = f.parse_special;
  o.add_bos = ParseAddBosChoice(f.add_bos);
  if (mode == CommandMode::kParseOnly) {
    if (f.method.config.empty()) BuildMethodOptions(f.method);
    return;
  }
  if (f.context_parallel) RequireMpi("--context-parallel");  // a build with MPI: RunEval says to use mpirun
  o.comm = comm;
  if (comm != nullptr && f.rank_timeout) ranks->set_timeout(*f.rank_timeout);
  // Rank 0 alone speaks: the load line, progress, the table and the output files.
  const bool speaks = comm == nullptr || comm->rank() == 0;
  {
    std::vector<RopeMethod> used = o.methods;
    if (o.kl_base_method) used.push_back(*o.kl_base_method);
    CheckMethodFlagsUsed(f.method, used);
  }
  o.method_options = BuildMethodOptions(f.method);
  const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
  o.model_path = f.model.empty() ? FindDataFile("stories260K.bin", dirs) : f.model;
  // A posenc checkpoint's training report (<model>.json): its RoPE and L0, and by default its held-out text.
  o.training_record = FindRunTrainingRecord(o.model_path, f.no_training_report, speaks);
  const TrainingRecord* record = o.training_record ? &*o.training_record : nullptr;
  if (!f.text.empty()) {
    o.text_path = f.text;
  } else if (record != nullptr && record->has_split) {
    o.text_path = record->held_out_path.empty() ? record->text_path : record->held_out_path;
    o.held_out_documents = record->held_out_path.empty();
    std::error_code ec;
    if (!std::filesystem::exists(o.text_path, ec)) {
      throw IoError(fmt::format("the {} text of training report {}, {}, does not exist: give --text, or "
                                "--no-training-report", record->held_out_path.empty() ? "training" : "held-out",
                                record->report_path, o.text_path));
    }
  } else {
    o.text_path = FindDataFile("text/tinystories_val_stories.txt", dirs);
    if (record != nullptr && speaks) {
      fmt::print(stderr, "note: training report {} does not state its texts and split: scoring {} (give --text)\n",
                 record->report_path, o.text_path);
    }
  }
  // --resume F continues F: its rows are kept, the rest computed, F rewritten unless --json names another file.
  const std::string json = f.json ? *f.json : f.resume;
  // Outputs are checked before the work (and before the inputs are read): a run never computes a table it cannot
  // write, nor replaces an input. A resumed file rewritten in place is that run's output, not an input.
  std::vector<RunPath> outputs;
  if (f.json) {
    outputs.push_back({"--json", *f.json});
  } else if (!f.resume.empty()) {
    outputs.push_back({"--resume", f.resume});
  }
  if (f.csv) outputs.push_back({"--csv", *f.csv});
  if (f.plot) outputs.push_back({"--plot", *f.plot});
  if (!speaks) outputs.clear();
  if (!f.save_logits.empty()) outputs.push_back({"--save-logits", f.save_logits});
  std::vector<RunPath> inputs{{"--model", o.model_path}, {"--text", o.text_path}, {"--tokenizer", f.tokenizer},
                              {"--config", f.method.config}};
  if (record != nullptr) inputs.push_back({"the training report", record->report_path});
  if (!o.kl_base_file.empty()) inputs.push_back({"--kl-baseline", o.kl_base_file});
  if (f.json && !f.resume.empty()) inputs.push_back({"--resume", f.resume});
  CheckRunPaths(inputs, outputs);
  o.tokenizer_path = f.tokenizer;
  // A llama2.c checkpoint holds no vocabulary: the bundled tok512 goes with it unless --tokenizer says otherwise.
  if (o.tokenizer_path.empty() && DetectModelFormat(o.model_path) == ModelFormat::kLlama2c) {
    o.tokenizer_path = FindDataFile("tok512.bin", dirs);
    CheckRunPaths(std::vector<RunPath>{{"--tokenizer (the bundled default)", o.tokenizer_path}}, outputs);
  }
  if (!f.resume.empty()) {
    ResumedRows resumed = ReadResumeRows(f.resume, o);
    o.resume_rows = std::move(resumed.rows);
    o.resume_compute_kinds = std::move(resumed.compute_kinds);
  }
  if (speaks) o.on_loaded = [](const std::string& line) { fmt::print(stderr, "{}\n", line); };

  // Rows stream as they finish (table line, files rewritten); Ctrl-C keeps the finished rows and exits 130.
  EvalStreamWriter writer(speaks ? json : "", speaks && f.csv ? *f.csv : "", stdout,
                          speaks && ::isatty(::fileno(stderr)) == 0 ? stderr : nullptr);
  EvalReport report;
  {
    ProgressBar bar(speaks);
    if (speaks) {
      o.on_row = [&](const EvalReport& r, size_t i) {
        bar.Clear();
        writer.OnRow(r, i);
      };
    }
    if (comm == nullptr) {
      g_interrupted = false;
      o.interrupt = &g_interrupted;
      std::signal(SIGINT, OnEvalInterrupt);
    }
    try {
      report = RunEval(o, [&](int64_t done, int64_t total) { bar.Update(done, total); });
    } catch (const EvalInterrupted& e) {
      std::signal(SIGINT, SIG_DFL);
      bar.Clear();
      std::fflush(stdout);
      fmt::print(stderr, "{}: {} rows kept{}\n", e.what(), writer.rows_written(),
                 json.empty() ? "" : fmt::format(" in {} (--resume {} continues)", json, json));
      std::exit(130);
    }
    std::signal(SIGINT, SIG_DFL);
  }
  if (!speaks) return;
  writer.Finish(report);
  if (f.plot) {
    const PlotOutcome outcome = PlotReport(report, *f.plot);
    fmt::print(stderr, "{}\n", outcome.message);
  }
}

}  // namespace

void RegisterEvalCommand(CLI::App& app, CommandMode mode, const Ranks* ranks) {
  auto flags = std::make_shared<EvalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Perplexity of a Llama-family model at context lengths past its training length, per RoPE method "
              "(defaults: the bundled stories260K model and TinyStories validation text)");
  cmd->add_option("--model", flags->model,
                  ".gguf file, Hugging Face checkpoint folder or llama2.c .bin (default: data/stories260K.bin)");
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "Tokenizer: llama2.c .bin, tokenizer.model, tokenizer.json or GGUF vocabulary (default: the "
                  "model's own; data/tok512.bin for a llama2.c checkpoint)");
  cmd->add_option("--weights", flags->weights,
                  "weight matrices: f32 (converted once at load), file (kept in the file's type, quantized "
                  "products), auto (file)")
      ->capture_default_str();
  cmd->add_option("--compute", flags->compute,
                  "arithmetic of the weight products: f32 (float32, OpenBLAS / quantized kernels), bf16 (bfloat16 "
                  "activations and weights, float32 sums, oneDNN on AMX / AVX512-BF16), int8 (Q8_0 matrices: "
                  "activations quantized to Q8_0 blocks as llama.cpp does, AVX512-VNNI; other matrices f32), "
                  "auto (per matrix: int8 for Q8_0 on VNNI without AMX, else bf16 where the CPU has bfloat16 "
                  "units, else f32); the load line names the path and kernel")
      ->capture_default_str();
  cmd->add_option("--train-ctx,--original-max-position-embeddings", flags->train_ctx,
                  "training length L0 in tokens, overriding the file's (methods scale from it; buckets use it)");
  cmd->add_flag("--no-training-report", flags->no_training_report,
               "ignore <model>.json, the report posenc train / finetune writes beside a checkpoint (by default its "
               "method and factor are the checkpoint's native RoPE, its L0 is L0, and its held-out documents are "
               "the default text)");
  cmd->add_option("--text", flags->text,
                  "UTF-8 text; lines '<|endoftext|>' split documents (default: "
                  "data/text/tinystories_val_stories.txt)");
  cmd->add_option("--ctx", flags->ctx, "context lengths L (tokens), comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--methods", flags->methods,
                  "none, linear, ntk, dynamic, dynamic-hf, yarn, llama3, longrope, native (the file's own RoPE), and "
                  "the position maps self-extend, dca, rerope, leaky-rerope, sinks, lm-infinite; comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--tokens", flags->tokens,
                  "N: the token budget per row, or 'all' (the whole text). posenc: predictions per row, a multiple "
                  "of every ctx; sliding / truncate: documents in file order until their tokens reach N; "
                  "llama-perplexity: N / ctx chunks unless --chunks")
      ->capture_default_str();
  cmd->add_option("--protocol", flags->protocol,
                  "posenc (the stream of documents in non-overlapping windows, every position scored), sliding "
                  "(YaRN's eval/perplexity.py: per document, windows every --stride tokens, BOS + ctx - 1 tokens), "
                  "llama-perplexity (llama.cpp's tool: whole text, chunks of ctx, second half scored), truncate "
                  "(YaRN's --truncate: BOS + each document's first ctx - 1 tokens)")
      ->capture_default_str();
  cmd->add_option("--stride", flags->stride, "sliding: tokens between window starts")->capture_default_str();
  cmd->add_option("--average", flags->average,
                  "sliding: windows (ppl = exp of the mean of the windows' mean NLLs, as YaRN) or tokens (the mean "
                  "over every scored token, as HF's perplexity guide)")
      ->capture_default_str();
  cmd->add_option("--chunks", flags->chunks, "llama-perplexity: the first K chunks (as llama.cpp's --chunks)");
  cmd->add_option("--min-doc-tokens", flags->min_doc_tokens,
                  "sliding / truncate: keep documents of at least this many tokens (YaRN's --dataset-min-tokens)")
      ->capture_default_str();
  cmd->add_option("--baseline", flags->baseline,
                  "paired differences (mean NLL, 95% CI over the protocol's units) of every row against this "
                  "method's row of the same ctx; '-' for none")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads,
                  fmt::format("OpenMP threads across windows (0: all cores; at most {})", kMaxThreads))
      ->capture_default_str();
  cmd->add_option("--add-bos", flags->add_bos,
                  "BOS at the start of each document: auto (as the tokenizer says), yes or no")
      ->capture_default_str();
  AddParseSpecialFlag(cmd, &flags->parse_special, "llama-perplexity tokenizes");
  cmd->add_flag("--allow-unused-tensors", flags->allow_unused_tensors,
                "evaluate a file holding tensors the model does not use (a note lists them) instead of refusing it");
  cmd->add_flag("--no-reuse", flags->no_reuse,
                "compute every row, also rows whose RoPE inputs are identical bit for bit to an earlier row of "
                "the same ctx (by default their result is copied and the report names them)");
  AddMethodFlags(cmd, &flags->method, "ctx");
  cmd->add_option("--json", flags->json,
                  "also write the results as JSON to this file (rewritten after every row; \"complete\": false "
                  "until the run ends)");
  cmd->add_option("--kl-baseline", flags->kl_baseline,
                  "KL(base || method) of the next-token distributions on the scored tokens per row and bucket "
                  "(kl_mean, kl_p99, top1_agree, dp_mean): the base is a method of this run at each ctx (e.g. none) "
                  "or a file --save-logits wrote (as llama.cpp's --kl-divergence-base)");
  cmd->add_option("--save-logits", flags->save_logits,
                  "write the --kl-baseline method's log-probabilities of every scored token at every ctx to this "
                  "file (a later run's --kl-baseline)");
  cmd->add_option("--resume", flags->resume,
                  "continue an interrupted run from its JSON: rows it holds are kept, the others computed, and the "
                  "file rewritten (unless --json names another); the model, text, tokens and protocol must match");
  cmd->add_option("--csv", flags->csv, "also write the results as CSV to this file");
  cmd->add_option("--plot", flags->plot, "draw ppl by context length and by position bucket (PNG, gnuplot)");
  cmd->add_flag("--context-parallel", flags->context_parallel,
                "under mpirun: split every window over the ranks (Ring Attention with global positions) instead "
                "of dealing whole windows to them (the default under mpirun, bit-identical to one process)");
  cmd->add_option("--context-split", flags->context_split,
                  "positions per rank with --context-parallel: zigzag (2N chunks, balanced causal work; the "
                  "default) or contiguous");
  cmd->add_option("--rank-timeout", flags->rank_timeout,
                  "under mpirun: seconds a rank waits for another before it calls it dead or hung and ends the job "
                  "(default 600; must exceed the longest row of windows one rank computes)");
  cmd->callback([flags, mode, ranks] { RunEvalCommand(*flags, mode, ranks); });
}

}  // namespace posenc::cli
