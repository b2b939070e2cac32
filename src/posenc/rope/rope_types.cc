#include "posenc/rope/rope_types.h"

#include <array>

#include "posenc/core/errors.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc {

std::span<const RopeTypeRow* const> RopeTypeTable() {
  static const std::array<const RopeTypeRow*, 7> kTable = {
      &scaling::DefaultRow(), &scaling::LinearRow(), &scaling::NtkRow(),      &scaling::DynamicRow(),
      &scaling::YarnRow(),    &scaling::Llama3Row(), &scaling::LongropeRow(),
  };
  return kTable;
}

const RopeTypeRow& RopeTypeRowOf(RopeType type) {
  for (const RopeTypeRow* row : RopeTypeTable()) {
    if (row->type == type) return *row;
  }
  throw ConfigError("rope_type has an unknown enum value");
}

}  // namespace posenc
