// `posenc demo finetune`: the "needs fine-tuning" column of the comparison table, measured small enough to run
// in a minute: the bundled model fine-tuned at twice its training length with each extension method, held-out
// perplexity before and after. The full measurement (L = 2048, up to 400 steps) is in docs/training.md.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "posenc/train/run.h"

namespace posenc::demo {

/// Everything `posenc demo finetune` prints.
struct FinetuneDemo {
  std::vector<TrainRunReport> runs;  // one per method: linear, ntk, yarn, dynamic
  std::string model;                 // ModelName of the model's path
  int64_t ctx = 0;                   // fine-tuning window 2 L0 (the bundled model: 1024)
  int64_t steps = 0;
};

/// Fine-tunes `model_path` (trained at `train_ctx` = L0 tokens) for 25 steps at L = 2 L0 (batch 1, lr 1e-4,
/// factor 2) with linear, ntk, yarn and dynamic on the training 80% of `text_path`, and measures held-out
/// perplexity at L0 and 2 L0 (4096 predictions each, or one window of 2 L0 when longer) before and after.
/// `progress`, when set, gets one line as each method starts and every 5 steps ("linear: step 5/25, loss
/// 2.3456"). Checkpoints go to a temporary folder, removed afterwards.
/// Errors: ConfigError naming the value if train_ctx is outside [1, 2^40]; as RunTraining; IoError if the
/// temporary folder cannot be made.
FinetuneDemo RunFinetuneDemo(const std::string& model_path, const std::string& tokenizer_path,
                             const std::string& text_path, int64_t train_ctx,
                             const std::function<void(const std::string& line)>& progress = {});

/// The demo as terminal text: the model and its L0, ppl per (method, step) at each held-out length, and where
/// the full table is.
std::string RenderFinetuneDemo(const FinetuneDemo& demo);

}  // namespace posenc::demo
