#include "posenc/demo/finetune_demo.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "posenc/core/errors.h"

namespace posenc::demo {

FinetuneDemo RunFinetuneDemo(const std::string& model_path, const std::string& tokenizer_path,
                             const std::string& text_path) {
  namespace fs = std::filesystem;
  FinetuneDemo demo;
  demo.ctx = 1024;
  demo.steps = 25;
  const fs::path dir = fs::temp_directory_path() / fmt::format("posenc_demo_finetune_{}", ::getpid());
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("cannot create {}: {}", dir.string(), ec.message()));
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{dir};
  for (const char* method : {"linear", "ntk", "yarn", "dynamic"}) {
    TrainRunOptions o;
    o.model_path = model_path;
    o.tokenizer_path = tokenizer_path;
    o.text_path = text_path;
    o.method = method;
    o.factor = 2.0;
    o.ctx = demo.ctx;
    o.steps = demo.steps;
    o.batch = 1;
    o.lr = 1e-4;
    o.warmup = 5;
    o.eval_ctx = {512, 1024};
    o.eval_at = {0, demo.steps};
    o.eval_tokens = 4096;
    o.out_path = (dir / fmt::format("{}.bin", method)).string();
    demo.runs.push_back(RunTraining(o, {}, nullptr));
  }
  return demo;
}

std::string RenderFinetuneDemo(const FinetuneDemo& demo) {
  std::string s = "== finetune: what a few steps at the longer length do for each method ==\n";
  if (demo.runs.empty()) return s;
  s += fmt::format("stories260K (trained at {}), fine-tuned at L = {} (factor 2) for {} steps, batch 1, lr 1e-4.\n",
                   demo.runs.front().original_ctx, demo.ctx, demo.steps);
  s += fmt::format("split: {}\n\nheld-out perplexity\n| method | step | L=512 | L=1024 |\n|---|---:|---:|---:|\n",
                   demo.runs.front().split_rule);
  for (const TrainRunReport& r : demo.runs) {
    for (size_t i = 0; i + 1 < r.held_out.size(); i += 2) {
      s += fmt::format("| {} | {} | {:.3f} | {:.3f} |\n", r.method, r.held_out[i].step, r.held_out[i].ppl,
                       r.held_out[i + 1].ppl);
    }
  }
  s += "\nThe full measurement (L = 2048; 0, 25, 100, 400 steps; plots) and the commands behind it are in "
       "docs/training.md.\n";
  return s;
}

}  // namespace posenc::demo
