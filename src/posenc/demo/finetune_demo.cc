#include "posenc/demo/finetune_demo.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "posenc/core/errors.h"
#include "posenc/demo/common.h"

namespace posenc::demo {

FinetuneDemo RunFinetuneDemo(const std::string& model_path, const std::string& tokenizer_path,
                             const std::string& text_path, int64_t train_ctx,
                             const std::function<void(const std::string& line)>& progress) {
  namespace fs = std::filesystem;
  CheckDemoTrainCtx(DemoTopic::kFinetune, train_ctx);
  FinetuneDemo demo;
  demo.model = ModelName(model_path);
  demo.ctx = 2 * train_ctx;
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
    if (progress) progress(fmt::format("{}: fine-tuning {} steps at L = {}", method, demo.steps, demo.ctx));
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
    o.eval_ctx = {train_ctx, demo.ctx};
    o.eval_at = {0, demo.steps};
    o.eval_tokens = std::max<int64_t>(4096, demo.ctx);
    o.out_path = (dir / fmt::format("{}.bin", method)).string();
    std::function<void(const TrainProgress&)> each;
    if (progress) {
      each = [&](const TrainProgress& p) {
        if (p.step % 5 == 0 || p.step == p.steps) {
          progress(fmt::format("{}: step {}/{}, loss {:.4f}", method, p.step, p.steps, p.loss));
        }
      };
    }
    demo.runs.push_back(RunTraining(o, each, nullptr));
  }
  return demo;
}

std::string RenderFinetuneDemo(const FinetuneDemo& demo) {
  std::string s = "== finetune: what a few steps at the longer length do for each method ==\n";
  if (demo.runs.empty()) return s;
  s += fmt::format("{} (trained at {}), fine-tuned at L = {} (factor 2) for {} steps, batch 1, lr 1e-4.\n",
                   demo.model, demo.runs.front().original_ctx, demo.ctx, demo.steps);
  s += fmt::format("split: {}\n\nheld-out perplexity\n| method | step | L={} | L={} |\n|---|---:|---:|---:|\n",
                   demo.runs.front().split_rule, demo.runs.front().original_ctx, demo.ctx);
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
