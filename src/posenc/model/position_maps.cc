#include "posenc/model/position_maps.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::unique_ptr<PositionMap> MakePositionMap(const std::string& name, const PositionMapOptions& o, int64_t ctx,
                                             int64_t L0) {
  if (L0 < 2) throw ConfigError(fmt::format("{}: train_ctx (L0) must be >= 2, got {}", name, L0));
  if (ctx < 1) throw ConfigError(fmt::format("{}: ctx must be >= 1, got {}", name, ctx));
  if (name == "self-extend") {
    const int64_t window = o.window.value_or(std::max<int64_t>(1, L0 / 4));
    if (!o.group && window >= L0) {
      throw ConfigError(fmt::format("self-extend: window {} >= L0 {} leaves no room for groups; set the group",
                                    window, L0));
    }
    const int64_t group = o.group.value_or(std::max<int64_t>(1, CeilDiv(std::max<int64_t>(0, ctx - window),
                                                                          L0 - window)));
    return MakeSelfExtendMap(group, window);
  }
  if (name == "dca") {
    return MakeDualChunkMap(o.chunk_size.value_or(3 * L0 / 4), o.local_size.value_or(L0 / 16));
  }
  if (name == "rerope" || name == "leaky-rerope") {
    const int64_t window = o.window.value_or(std::max<int64_t>(1, L0 / 2));
    if (name == "rerope") return MakeReRopeMap(window);
    if (!o.leak && window >= L0) {
      throw ConfigError(fmt::format("leaky-rerope: window {} >= L0 {} leaves no room for the leak; set the leak",
                                    window, L0));
    }
    const double leak = o.leak.value_or(
        std::max(1.0, static_cast<double>(ctx - window) / static_cast<double>(L0 - window)));
    return MakeLeakyReRopeMap(window, leak);
  }
  if (name == "sinks") {
    const int64_t sinks = o.sinks.value_or(4);
    if (!o.window && sinks >= L0) {
      throw ConfigError(fmt::format("sinks: {} sink tokens >= L0 {} leave no recent window; set the window", sinks,
                                    L0));
    }
    return MakeSinksMap(sinks, o.window.value_or(L0 - sinks));
  }
  if (name == "lm-infinite") return MakeLmInfiniteMap(o.n_global.value_or(10), o.window.value_or(L0));
  throw ConfigError(fmt::format("unknown position map '{}' (expected self-extend, dca, rerope, leaky-rerope, "
                                "sinks or lm-infinite)", name));
}

}  // namespace posenc
