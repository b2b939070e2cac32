#include "posenc/train/lr_schedule.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "posenc/core/errors.h"

namespace posenc {

void ValidateLrSchedule(const LrSchedule& s) {
  if (!std::isfinite(s.max_lr) || s.max_lr <= 0.0) throw ConfigError(fmt::format("max_lr must be finite and > 0, got {}", s.max_lr));
  if (!std::isfinite(s.min_lr) || s.min_lr < 0.0 || s.min_lr > s.max_lr) {
    throw ConfigError(fmt::format("min_lr must be in [0, max_lr = {}], got {}", s.max_lr, s.min_lr));
  }
  if (s.warmup_steps < 0) throw ConfigError(fmt::format("warmup_steps must be >= 0, got {}", s.warmup_steps));
  if (s.total_steps < 1 || s.total_steps < s.warmup_steps) {
    throw ConfigError(fmt::format("total_steps must be >= 1 and >= warmup_steps = {}, got {}", s.warmup_steps,
                                  s.total_steps));
  }
}

double LrSchedule::At(int64_t step) const {
  if (step < 0) throw RangeError(fmt::format("learning-rate step must be >= 0, got {}", step));
  if (step < warmup_steps) return max_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double ratio = static_cast<double>(step - warmup_steps) / static_cast<double>(total_steps - warmup_steps);
  return min_lr + 0.5 * (1.0 + std::cos(std::numbers::pi * ratio)) * (max_lr - min_lr);
}

}  // namespace posenc
