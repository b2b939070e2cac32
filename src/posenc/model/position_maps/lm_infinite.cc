// LM-Infinite: Han et al. 2024, "LM-Infinite: Zero-Shot Extreme Length Generalization for Large Language
// Models", sec. 4: a Lambda-shaped mask (global tokens and a local window) and distances capped at the window.
#include <memory>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/position_maps.h"

namespace posenc {
namespace {

class LmInfinite final : public PositionMap {
 public:
  LmInfinite(int64_t n_global, int64_t window) : n_global_(n_global), window_(window) {}
  std::string_view name() const override { return "lm-infinite"; }
  std::string parameters() const override { return fmt::format("global {}, window {}", n_global_, window_); }
  int n_sets() const override { return 2; }
  // Set 1: a global key farther than the window is seen at distance exactly window.
  double QueryPosition(int set, int64_t pos) const override {
    return set == 0 ? static_cast<double>(pos) : static_cast<double>(window_);
  }
  double KeyPosition(int set, int64_t pos) const override { return set == 0 ? static_cast<double>(pos) : 0.0; }
  int Select(int64_t query_pos, int64_t key_pos) const override {
    if (query_pos - key_pos < window_) return 0;
    return key_pos < n_global_ ? 1 : -1;
  }

 private:
  int64_t n_global_, window_;
};

}  // namespace

std::unique_ptr<PositionMap> MakeLmInfiniteMap(int64_t n_global, int64_t window) {
  if (n_global < 0) throw ConfigError(fmt::format("lm-infinite global must be >= 0, got {}", n_global));
  if (window < 1) throw ConfigError(fmt::format("lm-infinite window must be >= 1, got {}", window));
  return std::make_unique<LmInfinite>(n_global, window);
}

}  // namespace posenc
