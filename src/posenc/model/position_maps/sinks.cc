// Attention sinks: Xiao et al. 2024, "Efficient Streaming Language Models with Attention Sinks" (StreamingLLM),
// sec. 3.2: a cache of the first `sinks` tokens and the `window` most recent ones, positions inside the cache.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/position_maps.h"

namespace posenc {
namespace {

class Sinks final : public PositionMap {
 public:
  Sinks(int64_t sinks, int64_t window) : sinks_(sinks), window_(window) {}
  std::string_view name() const override { return "sinks"; }
  std::string parameters() const override { return fmt::format("sinks {}, window {}", sinks_, window_); }
  int n_sets() const override { return 2; }
  // Set 0: a recent key and the query keep their distance. Set 1: a sink key at its own index m, the query at
  // its cache index, min(i, sinks + window - 1) (the cache is full once i reaches it).
  double QueryPosition(int set, int64_t pos) const override {
    return set == 0 ? static_cast<double>(pos) : static_cast<double>(std::min(pos, sinks_ + window_ - 1));
  }
  double KeyPosition(int, int64_t pos) const override { return static_cast<double>(pos); }
  int Select(int64_t query_pos, int64_t key_pos) const override {
    if (query_pos - key_pos < window_) return 0;
    return key_pos < sinks_ ? 1 : -1;
  }

 private:
  int64_t sinks_, window_;
};

}  // namespace

std::unique_ptr<PositionMap> MakeSinksMap(int64_t sinks, int64_t window) {
  if (sinks < 0) throw ConfigError(fmt::format("sinks must be >= 0, got {}", sinks));
  if (window < 1) throw ConfigError(fmt::format("sinks window must be >= 1, got {}", window));
  return std::make_unique<Sinks>(sinks, window);
}

}  // namespace posenc
