// Learning-rate schedule: linear warm-up, then cosine decay to a floor.
#pragma once

#include <cstdint>

namespace posenc {

/// lr(step) for 0-based steps s, with W = warmup_steps and S = total_steps:
///   s < W:        max_lr * (s + 1) / W                        (linear warm-up; the first step is not 0)
///   W <= s < S:   min_lr + 0.5 (1 + cos(pi (s - W) / (S - W))) (max_lr - min_lr)   (cosine decay)
///   s >= S:       min_lr
/// Source: llm.c train_gpt2.cu `get_learning_rate` / nanoGPT `get_lr` (Loshchilov & Hutter 2017, SGDR, without
/// restarts).
struct LrSchedule {
  double max_lr = 1e-3;
  double min_lr = 0.0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;

  /// Errors: RangeError if step < 0.
  double At(int64_t step) const;
};

/// Errors: ConfigError naming the field and value unless max_lr is finite and > 0, min_lr is finite and in
/// [0, max_lr], warmup_steps >= 0 and total_steps >= max(1, warmup_steps).
void ValidateLrSchedule(const LrSchedule& schedule);

}  // namespace posenc
