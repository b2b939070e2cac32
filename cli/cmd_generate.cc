// posenc generate: text from a Llama-family model (GGUF, Hugging Face folder or llama2.c .bin) with the KV cache
// and llama2.c sampling, optionally with RoPE scaling.
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "option_flags.h"
#include "posenc/eval/data_files.h"
#include "posenc/model/generate.h"
#include "posenc/model/loader.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR ""
#endif

namespace posenc::cli {
namespace {

struct GenerateFlags {
  std::string model, tokenizer;
  std::string method = "none";
  std::optional<double> factor;
  std::optional<int64_t> train_ctx;
  GenerateOptions options;
};

void RunGenerateCommand(GenerateFlags& f, CommandMode mode) {
  GenerateOptions& o = f.options;
  o.method = ParseRopeMethod(f.method);
  o.method_options.factor = f.factor;
  o.train_ctx = f.train_ctx;
  if (mode == CommandMode::kParseOnly) return;
  const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
  o.model_path = f.model.empty() ? FindDataFile("stories260K.bin", dirs) : f.model;
  o.tokenizer_path = f.tokenizer;
  // A llama2.c checkpoint holds no vocabulary: the bundled tok512 goes with the bundled model (as before).
  if (o.tokenizer_path.empty() && DetectModelFormat(o.model_path) == ModelFormat::kLlama2c) {
    o.tokenizer_path = FindDataFile("tok512.bin", dirs);
  }
  const GenerateResult r = Generate(o, [](const std::string& piece) {
    fmt::print("{}", piece);
    std::fflush(stdout);
  });
  fmt::print("\n");
  fmt::print(stderr, "{}\n", r.model_summary);
  for (const std::string& w : r.model_warnings) fmt::print(stderr, "note: {}\n", WithFlags(w));
  if (r.prompt_tokens_unused > 0) {
    fmt::print(stderr, "note: the prompt has {} tokens but --steps {} stops after {} of them: its last {} tokens were "
               "not used\n", r.prompt_tokens, o.steps, o.steps, r.prompt_tokens_unused);
  }
  if (o.seed == 0) {
    fmt::print(stderr, "seed 0: seeded from the clock with {} (-s {} repeats this run)\n", r.seed, r.seed);
  }
  fmt::print(stderr, "{} tokens ({} sampled) in {:.2f} s: {:.0f} tokens/s; RoPE {}, {} KV cache\n",
             r.tokens.size() - 1, r.n_sampled, r.seconds,
             r.seconds > 0 ? static_cast<double>(r.tokens.size() - 1) / r.seconds : 0.0, f.method,
             KvCacheModeName(r.cache_mode));
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, CommandMode mode) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text with a Llama-family model (KV cache; llama2.c temperature + top-p sampling)");
  cmd->add_option("--model", flags->model,
                  ".gguf file, Hugging Face checkpoint folder or llama2.c .bin (default: data/stories260K.bin)");
  cmd->add_option("--tokenizer", flags->tokenizer,
                  "tokenizer (default: the model's own; data/tok512.bin for a llama2.c checkpoint)");
  AddParseSpecialFlag(cmd, &flags->options.parse_special, "llama-cli without -sp");
  cmd->add_flag("--allow-unused-tensors", flags->options.load.allow_unused_tensors,
                "run a file holding tensors the model does not use (a note lists them) instead of refusing it");
  cmd->add_option("--train-ctx,--original-max-position-embeddings", flags->train_ctx,
                  "training length L0 in tokens, overriding the file's");
  cmd->add_option("--prompt", flags->options.prompt, "text to continue (default: none, start from BOS)");
  cmd->add_option("-n,--steps", flags->options.steps, "positions to run, prompt included")->capture_default_str();
  cmd->add_option("-t,--temperature", flags->options.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("-p,--topp", flags->options.topp, "top-p (nucleus) threshold")->capture_default_str();
  cmd->add_option("-s,--seed", flags->options.seed,
                  "xorshift RNG seed; 0 = seed from the clock, as llama2.c does (the seed used is printed on stderr)")
      ->capture_default_str();
  cmd->add_option("--method", flags->method, "RoPE: none, linear, ntk, dynamic, dynamic-hf, yarn, native")
      ->capture_default_str();
  cmd->add_option("--factor", flags->factor, "scaling factor s (default: max(1, steps / L0))");
  cmd->callback([flags, mode] { RunGenerateCommand(*flags, mode); });
}

}  // namespace posenc::cli
