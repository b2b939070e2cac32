// `posenc demo finetune`: the "needs fine-tuning" column of the comparison table, measured small enough to run
// in a minute: the bundled model fine-tuned at twice its training length with each extension method, held-out
// perplexity before and after. The full measurement (L = 2048, up to 400 steps) is in docs/training.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/train/run.h"

namespace posenc::demo {

/// Everything `posenc demo finetune` prints.
struct FinetuneDemo {
  std::vector<TrainRunReport> runs;  // one per method: linear, ntk, yarn, dynamic
  int64_t ctx = 0;                   // fine-tuning window (L0 = 512: 1024)
  int64_t steps = 0;
};

/// Fine-tunes `model_path` for 25 steps at L = 1024 (batch 1, lr 1e-4, factor 2) with linear, ntk, yarn and
/// dynamic on the training 80% of `text_path`, and measures held-out perplexity at 512 and 1024 (4096
/// predictions each) before and after. Checkpoints go to a temporary folder, removed afterwards.
/// Errors: as RunTraining; IoError if the temporary folder cannot be made.
FinetuneDemo RunFinetuneDemo(const std::string& model_path, const std::string& tokenizer_path,
                             const std::string& text_path);

/// The demo as terminal text: ppl per (method, step) and length, and where the full table is.
std::string RenderFinetuneDemo(const FinetuneDemo& demo);

}  // namespace posenc::demo
