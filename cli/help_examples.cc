// The examples that end each `--help`, and `posenc --version`: one table here, so a command's file keeps its flags.
#include <CLI/CLI.hpp>

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "posenc/blas/blas_core.h"
#include "posenc/core/version.h"
#include "posenc/kernels/targets.h"

namespace posenc::cli {
namespace {

struct Examples {
  const char* command;  // "" for the top level
  std::vector<const char*> lines;
};

const std::vector<Examples>& AllExamples() {
  static const std::vector<Examples> kExamples = {
      {"",
       {"posenc eval                                       # the main job: stories260K past its 512 tokens",
        "posenc inspect --config examples/configs/llama3.1-8b.json",
        "posenc demo rope"}},
      {"eval",
       {"posenc eval --ctx 512,1024,2048 --methods none,ntk,yarn --json out.json --plot out.png",
        "posenc eval --model my-model.Q8_0.gguf --text book.txt --ctx 4096,8192 --methods none,yarn,native",
        "mpirun -np 2 posenc eval --ctx 2048 --context-parallel"}},
      {"passkey",
       {"posenc passkey --lengths 256,512,1024 --methods none,yarn,self-extend --plot passkey.png",
        "posenc passkey --model my-model.Q8_0.gguf --lengths 4096,8192 --trials 10 --json passkey.json",
        "posenc passkey --write-training-text passkey.txt --documents 20000 --max-tokens 256"}},
      {"inspect",
       {"posenc inspect --config examples/configs/llama3.1-8b.json --positions 0,1,4095",
        "posenc inspect --head-dim 128 --rope-type yarn --factor 4 --original-max-position-embeddings 4096 --json",
        "posenc inspect --model my-model.Q8_0.gguf"}},
      {"generate",
       {"posenc generate -t 0                               # greedy: llama2.c's published sample",
        "posenc generate -t 1.0 -p 0.9 -s 133742 --method yarn --steps 1024",
        "posenc generate --model my-model.Q8_0.gguf --prompt \"Once upon a time\" -t 0.8"}},
      {"bench",
       {"posenc bench --json bench.json",
        "posenc bench --filter decode,attention_L2048",
        "posenc bench --filter train --no-torch"}},
      {"demo",
       {"posenc demo                                       # every topic in turn",
        "posenc demo extension --plot-dir plots",
        "posenc demo compare --model my-model.bin --tokenizer tok.bin"}},
      {"tokenize",
       {"echo 'Once upon a time' | posenc tokenize --model tests/data/tokenizer/ggml-vocab-gpt-2.gguf",
        "posenc tokenize --model path/to/hf-folder/ --text-file notes.txt --json",
        "posenc tokenize --model data/stories260K.bin --tokenizer data/tok512.bin --add-bos no"}},
      {"finetune",
       {"posenc finetune --method yarn --ctx 1024 --steps 25 --out ft.bin   # then: posenc eval --model ft.bin "
        "--methods none,native",
        "posenc finetune --model path/to/hf-folder/ --method linear --ctx 4096 --steps 100 --out ft.gguf",
        "posenc finetune --method ntk --ctx 2048 --steps 200 --out ft.gguf --resume ft.gguf.state"}},
      {"train",
       {"posenc train --config examples/configs/train/stories260K_rope.json --ctx 256 --steps 300 --out m.gguf",
        "posenc train --config examples/configs/train/stories260K_rope.json --ctx 256 --steps 300 --out m.gguf "
        "--eval-ctx 256,512 --eval-at 100,300"}},
  };
  return kExamples;
}

std::string Footer(const Examples& e) {
  std::string out = "Examples:\n";
  for (const char* line : e.lines) out += fmt::format("  {}\n", line);
  return out;
}

std::string VersionText() {
  const kernels::KernelTargets t = kernels::GetKernelTargets();
  return fmt::format("posenc {} (commit {})\nkernels: {} on this CPU (compiled for: {}; usable here: {})\nBLAS: {}",
                     Version(), GitCommit(), t.dispatched, fmt::join(t.compiled, " "), fmt::join(t.usable, " "),
                     DescribeBlas());
}

void AddVersionFlag(CLI::App& app) {
  app.set_version_flag("--version", [] { return VersionText(); }, "Print the version, the git commit, the kernels' "
                       "SIMD targets and the BLAS in use, then exit");
}

}  // namespace

void AddHelpExamplesAndVersion(CLI::App& app) {
  for (const Examples& e : AllExamples()) {
    CLI::App* target = e.command[0] == '\0' ? &app : app.get_subcommand(e.command);
    target->footer(Footer(e));
  }
  AddVersionFlag(app);
}

void AddBenchHelpExamplesAndVersion(CLI::App& app) {
  for (const Examples& e : AllExamples()) {
    if (std::string(e.command) == "bench") app.footer(Footer(e));
  }
  AddVersionFlag(app);
}

}  // namespace posenc::cli
