// posenc passkey: passkey retrieval accuracy per (length, depth, method); --write-training-text writes the text
// a retrieval model is trained on.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "option_flags.h"
#include "method_flags.h"
#include "posenc/eval/data_files.h"
#include "posenc/eval/passkey.h"
#include "posenc/io/output_file.h"
#include "posenc/model/loader.h"
#include "posenc/report/passkey_report.h"
#include "posenc/tokenizer/load.h"
#include "posenc/tokenizer/tokenize.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR ""
#endif

namespace posenc::cli {
namespace {

std::atomic<bool> g_interrupted{false};  // set by SIGINT while a passkey run goes on
extern "C" void OnPasskeyInterrupt(int) { g_interrupted = true; }

// The bundled retrieval model and its tokenizer (data/SOURCE.md says how it was made).
constexpr const char* kBundledModel = "passkey/passkey256.bin";

struct PasskeyFlags {
  std::string model, tokenizer;
  bool no_training_report = false;
  std::optional<int64_t> train_ctx;
  std::string weights = "auto";
  std::string compute = "f32";
  std::vector<int64_t> lengths;
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};
  int64_t trials = 5;
  std::vector<std::string> methods = {"none", "linear", "ntk", "yarn"};
  uint64_t seed = 1;
  int64_t max_new_tokens = 10;
  int threads = 0;
  std::string add_bos = "auto";
  bool allow_unused_tensors = false;
  MethodFlags method;
  std::optional<std::string> json, plot;
  // --write-training-text
  std::optional<std::string> training_text;
  int64_t documents = 20000;
  int64_t max_tokens = 256;
};

void WriteTrainingText(const PasskeyFlags& f, const std::string& tokenizer_model, const std::string& tokenizer_path) {
  const std::unique_ptr<Tokenizer> tokenizer = LoadModelTokenizer(tokenizer_model, tokenizer_path);
  const bool bos = ParseAddBosChoice(f.add_bos).value_or(tokenizer->add_bos_default());
  const std::string text = PasskeyTrainingText(*tokenizer, bos, f.documents, f.max_tokens, f.max_new_tokens, f.seed);
  WriteFileAtomically(*f.training_text, text);
  fmt::print(stderr, "wrote {}: {} documents of up to {} tokens ({} of them the answer's room), seed {}\n",
             *f.training_text, f.documents, f.max_tokens, f.max_new_tokens, f.seed);
}

void RunPasskeyCommand(const PasskeyFlags& f, CommandMode mode) {
  PasskeyOptions o;
  o.train_ctx = f.train_ctx;
  o.weights = ParseWeightStorage(f.weights);
  o.compute = ParseComputePath(f.compute);
  o.load.allow_unused_tensors = f.allow_unused_tensors;
  o.lengths = f.lengths;
  o.depths = f.depths;
  o.trials = f.trials;
  o.methods.clear();
  for (const std::string& name : f.methods) o.methods.push_back(ParseRopeMethod(name));
  o.seed = f.seed;
  o.max_new_tokens = f.max_new_tokens;
  o.threads = f.threads;
  o.add_bos = ParseAddBosChoice(f.add_bos);
  if (mode == CommandMode::kParseOnly) {
    if (f.method.config.empty()) BuildMethodOptions(f.method);
    return;
  }
  CheckMethodFlagsUsed(f.method, o.methods);
  o.method_options = BuildMethodOptions(f.method);
  const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
  o.model_path = f.model.empty() ? FindDataFile(kBundledModel, dirs) : f.model;
  o.tokenizer_path = f.tokenizer;
  if (o.tokenizer_path.empty() && DetectModelFormat(o.model_path) == ModelFormat::kLlama2c) {
    o.tokenizer_path = FindDataFile("tok512.bin", dirs);
  }
  // A posenc checkpoint's training report (<model>.json): its RoPE (native) and L0; an input either way.
  o.training_record = FindRunTrainingRecord(o.model_path, f.no_training_report, /*speak=*/true);
  std::vector<RunPath> inputs{{"--model", o.model_path}, {"--tokenizer", o.tokenizer_path},
                              {"--config", f.method.config}};
  if (o.training_record) inputs.push_back({"the training report", o.training_record->report_path});
  if (f.training_text) {
    CheckRunPaths(inputs, std::vector<RunPath>{{"--write-training-text", *f.training_text}});
    WriteTrainingText(f, o.model_path, o.tokenizer_path);
    return;
  }
  std::vector<RunPath> outputs;
  if (f.json) outputs.push_back({"--json", *f.json});
  if (f.plot) outputs.push_back({"--plot", *f.plot});
  CheckRunPaths(inputs, outputs);

  bool header = false;
  const auto write_json = [&](const PasskeyReport& r) {
    if (f.json) {
      WriteFileAtomically(*f.json, PasskeyJson(r).dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    }
  };
  g_interrupted = false;
  o.interrupt = &g_interrupted;
  std::signal(SIGINT, OnPasskeyInterrupt);
  PasskeyReport report;
  try {
    report = RunPasskey(o, [&](const PasskeyReport& r, size_t first, size_t count) {
      if (!header) {
        fmt::print(stderr, "{}\ncompute: {}\n", r.model_summary, r.compute);
        for (const std::string& w : r.model_warnings) fmt::print(stderr, "note: {}\n", WithFlags(w));
        fmt::print("{}", FormatPasskeyHeader(r));
        header = true;
      }
      fmt::print("{}", FormatPasskeyLines(r, first, count));
      std::fflush(stdout);
      write_json(r);
    });
  } catch (const PasskeyInterrupted&) {
    std::signal(SIGINT, SIG_DFL);
    std::fflush(stdout);
    fmt::print(stderr, "interrupted: the finished blocks are above{}\n",
               f.json ? fmt::format(" and in {} (\"complete\": false)", *f.json) : "");
    std::exit(130);
  }
  std::signal(SIGINT, SIG_DFL);
  write_json(report);
  fmt::print(stderr, "{}", FormatPasskeyFooter(report));
  fmt::print(stderr, "{} keys (seed {}) x {} depths per length; greedy answers of up to {} tokens; {} threads\n",
             report.keys.size(), report.seed, report.depths.size(), report.max_new_tokens, report.threads);
  if (f.plot) fmt::print(stderr, "{}\n", PlotPasskey(report, *f.plot).message);
}

}  // namespace

void RegisterPasskeyCommand(CLI::App& app, CommandMode mode) {
  auto flags = std::make_shared<PasskeyFlags>();
  CLI::App* cmd = app.add_subcommand(
      "passkey", "Passkey retrieval accuracy per length, depth and RoPE method (the landmark / YaRN prompt, greedy "
                 "answers; default: the bundled retrieval model trained at 256 tokens)");
  cmd->add_option("--model", flags->model,
                  fmt::format(".gguf file, Hugging Face checkpoint folder or llama2.c .bin (default: data/{})",
                              kBundledModel));
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "tokenizer (default: the model's own; data/tok512.bin for a llama2.c checkpoint)");
  cmd->add_option("--train-ctx,--original-max-position-embeddings", flags->train_ctx,
                  "training length L0 in tokens, overriding the file's");
  cmd->add_flag("--no-training-report", flags->no_training_report,
                "ignore <model>.json, the report posenc train / finetune writes beside a checkpoint (by default its "
                "method and factor are the checkpoint's native RoPE and its L0 is L0)");
  cmd->add_option("--weights", flags->weights, "weight matrices: f32, file or auto (as eval)")->capture_default_str();
  cmd->add_option("--compute", flags->compute, "arithmetic of the weight products: f32, bf16, int8 or auto (as eval)")
      ->capture_default_str();
  cmd->add_option("--lengths", flags->lengths,
                  "tokens of each prompt plus its answer, comma separated (default: L0, 2 L0, 4 L0)")
      ->delimiter(',');
  cmd->add_option("--depths", flags->depths, "where the key sits in the filler, 0 (first) to 1 (last), comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--trials", flags->trials, "keys per (length, depth)")->capture_default_str();
  cmd->add_option("--methods", flags->methods,
                  "RoPE methods as eval's: none, linear, ntk, dynamic, dynamic-hf, yarn, llama3, longrope, native, "
                  "self-extend, dca, rerope, leaky-rerope, sinks, lm-infinite; comma separated")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--seed", flags->seed, "the keys (uniform in [1, 50000]); the same keys for every cell")
      ->capture_default_str();
  cmd->add_option("--max-new-tokens", flags->max_new_tokens, "the answer's token budget (greedy)")
      ->capture_default_str();
  cmd->add_option("--threads", flags->threads, "OpenMP threads across trials (0: all cores)")->capture_default_str();
  cmd->add_option("--add-bos", flags->add_bos, "BOS before the prompt: auto (as the tokenizer says), yes or no")
      ->capture_default_str();
  cmd->add_flag("--allow-unused-tensors", flags->allow_unused_tensors,
                "run a file holding tensors the model does not use (a note lists them) instead of refusing it");
  AddMethodFlags(cmd, &flags->method, "length");
  cmd->add_option("--json", flags->json, "also write the results as JSON (rewritten after every length and method)");
  cmd->add_option("--plot", flags->plot, "draw the accuracy heat-map by length and depth, a panel per method (PNG)");
  cmd->add_option("--write-training-text", flags->training_text,
                  "instead of measuring: write --documents prompts with their answers (\" K.\") for posenc train, "
                  "lengths uniform up to --max-tokens under the model's tokenizer (--max-new-tokens of each kept "
                  "for the answer, as in a measurement)");
  cmd->add_option("--documents", flags->documents, "--write-training-text: prompts to write")->capture_default_str();
  cmd->add_option("--max-tokens", flags->max_tokens, "--write-training-text: longest document, tokens")
      ->capture_default_str();
  cmd->callback([flags, mode] { RunPasskeyCommand(*flags, mode); });
}

}  // namespace posenc::cli
