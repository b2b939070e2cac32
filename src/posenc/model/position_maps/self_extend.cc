// Self-Extend: Jin et al. 2024, "LLM Maybe LongLM: Self-Extend LLM Context Window Without Tuning", sec. 3.
#include <memory>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/position_maps.h"

namespace posenc {
namespace {

class SelfExtend final : public PositionMap {
 public:
  SelfExtend(int64_t group, int64_t window) : group_(group), window_(window) {}
  std::string_view name() const override { return "self-extend"; }
  std::string parameters() const override { return fmt::format("group {}, window {}", group_, window_); }
  int n_sets() const override { return 2; }
  double QueryPosition(int set, int64_t pos) const override {
    // Positions are >= 0 (the block refuses others), so / is floor. Grouped queries are shifted by
    // window - window / group so that the grouped distance continues the neighbour one at the seam (eq. 4).
    return set == 0 ? static_cast<double>(pos)
                    : static_cast<double>(pos / group_ + window_ - window_ / group_);
  }
  double KeyPosition(int set, int64_t pos) const override {
    return set == 0 ? static_cast<double>(pos) : static_cast<double>(pos / group_);
  }
  int Select(int64_t query_pos, int64_t key_pos) const override { return query_pos - key_pos < window_ ? 0 : 1; }

 private:
  int64_t group_, window_;
};

}  // namespace

std::unique_ptr<PositionMap> MakeSelfExtendMap(int64_t group, int64_t window) {
  if (group < 1) throw ConfigError(fmt::format("self-extend group must be >= 1, got {}", group));
  if (window < 1) throw ConfigError(fmt::format("self-extend window must be >= 1, got {}", window));
  return std::make_unique<SelfExtend>(group, window);
}

}  // namespace posenc
