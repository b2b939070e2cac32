// posenc generate: text from a llama2.c model (KV cache, llama2.c sampling), optionally with RoPE scaling.
#include <cstdio>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "posenc/eval/data_files.h"
#include "posenc/eval/generate.h"

#ifndef POSENC_DATA_DIR
#define POSENC_DATA_DIR ""
#endif

namespace posenc::cli {
namespace {

struct GenerateFlags {
  std::string model, tokenizer;
  std::string method = "none";
  std::optional<double> factor;
  GenerateOptions options;
};

void RunGenerateCommand(GenerateFlags& f, CommandMode mode) {
  GenerateOptions& o = f.options;
  o.method = ParseEvalMethod(f.method);
  o.method_options.factor = f.factor;
  if (mode == CommandMode::kParseOnly) return;
  const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
  o.model_path = f.model.empty() ? FindDataFile("stories260K.bin", dirs) : f.model;
  o.tokenizer_path = f.tokenizer.empty() ? FindDataFile("tok512.bin", dirs) : f.tokenizer;
  const GenerateResult r = Generate(o, [](const std::string& piece) {
    fmt::print("{}", piece);
    std::fflush(stdout);
  });
  fmt::print("\n");
  if (r.prompt_tokens_unused > 0) {
    fmt::print(stderr, "note: the prompt has {} tokens but --steps {} stops after {} of them: its last {} tokens were "
               "not used\n", r.prompt_tokens, o.steps, o.steps, r.prompt_tokens_unused);
  }
  if (o.seed == 0) fmt::print(stderr, "seed 0: seeded from the clock with {} (-s {} repeats this run)\n", r.seed, r.seed);
  fmt::print(stderr, "{} tokens ({} sampled) in {:.2f} s: {:.0f} tokens/s; RoPE {}, {} KV cache\n",
             r.tokens.size() - 1, r.n_sampled, r.seconds,
             r.seconds > 0 ? static_cast<double>(r.tokens.size() - 1) / r.seconds : 0.0, f.method,
             KvCacheModeName(r.cache_mode));
}

}  // namespace

void RegisterGenerateCommand(CLI::App& app, CommandMode mode) {
  auto flags = std::make_shared<GenerateFlags>();
  CLI::App* cmd = app.add_subcommand(
      "generate", "Generate text with a llama2.c model (KV cache; llama2.c temperature + top-p sampling)");
  cmd->add_option("--model", flags->model, "llama2.c checkpoint (default: data/stories260K.bin)");
  cmd->add_option("--tokenizer", flags->tokenizer, "llama2.c tokenizer .bin (default: data/tok512.bin)");
  cmd->add_option("--prompt", flags->options.prompt, "text to continue (default: none, start from BOS)");
  cmd->add_option("-n,--steps", flags->options.steps, "positions to run, prompt included")->capture_default_str();
  cmd->add_option("-t,--temperature", flags->options.temperature, "0 = greedy")->capture_default_str();
  cmd->add_option("-p,--topp", flags->options.topp, "top-p (nucleus) threshold")->capture_default_str();
  cmd->add_option("-s,--seed", flags->options.seed,
                  "xorshift RNG seed; 0 = seed from the clock, as llama2.c does (the seed used is printed on stderr)")
      ->capture_default_str();
  cmd->add_option("--method", flags->method, "RoPE: none, linear, ntk, dynamic, dynamic-hf, yarn")
      ->capture_default_str();
  cmd->add_option("--factor", flags->factor, "scaling factor s (default: max(1, steps / L0))");
  cmd->callback([flags, mode] { RunGenerateCommand(*flags, mode); });
}

}  // namespace posenc::cli
