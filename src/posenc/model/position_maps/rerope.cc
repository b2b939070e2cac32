// ReRoPE and Leaky ReRoPE: Su 2023, "Rectified Rotary Position Embeddings" (kexue.fm/archives/9708); the
// relative distance is capped at a window (ReRoPE) or grows 1/leak per token past it (Leaky ReRoPE).
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/position_maps.h"

namespace posenc {
namespace {

class LeakyReRope final : public PositionMap {
 public:
  // leak = 0 stands for ReRoPE (distance fixed at window), else Leaky ReRoPE.
  LeakyReRope(int64_t window, double leak) : window_(window), leak_(leak) {}
  std::string_view name() const override { return leak_ == 0 ? "rerope" : "leaky-rerope"; }
  std::string parameters() const override {
    return leak_ == 0 ? fmt::format("window {}", window_) : fmt::format("window {}, leak {}", window_, leak_);
  }
  int n_sets() const override { return 2; }
  double QueryPosition(int set, int64_t pos) const override {
    if (set == 0) return static_cast<double>(pos);
    const double w = static_cast<double>(window_);
    return leak_ == 0 ? w : w + (static_cast<double>(pos) - w) / leak_;
  }
  double KeyPosition(int set, int64_t pos) const override {
    if (set == 0) return static_cast<double>(pos);
    return leak_ == 0 ? 0.0 : static_cast<double>(pos) / leak_;
  }
  int Select(int64_t query_pos, int64_t key_pos) const override { return query_pos - key_pos < window_ ? 0 : 1; }

 private:
  int64_t window_;
  double leak_;
};

void CheckWindow(const char* method, int64_t window) {
  if (window < 1) throw ConfigError(fmt::format("{} window must be >= 1, got {}", method, window));
}

}  // namespace

std::unique_ptr<PositionMap> MakeReRopeMap(int64_t window) {
  CheckWindow("rerope", window);
  return std::make_unique<LeakyReRope>(window, 0.0);
}

std::unique_ptr<PositionMap> MakeLeakyReRopeMap(int64_t window, double leak) {
  CheckWindow("leaky-rerope", window);
  if (!std::isfinite(leak) || leak < 1.0) {
    throw ConfigError(fmt::format("leaky-rerope leak must be finite and >= 1, got {}", leak));
  }
  return std::make_unique<LeakyReRope>(window, leak);
}

}  // namespace posenc
