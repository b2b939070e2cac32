// The rope-type table: one row per RopeType, each defined by its scaling file (rope/scaling/<type>.cc). A row
// says everything posenc does per type, so adding a rope type is one scaling file plus one entry in the
// registry (rope/rope_types.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"

namespace posenc {

/// One rope type. All functions take RopeParams of this row's type; validate runs after the type-independent
/// checks of ValidateRopeParams, compute / inv_freq_inputs / regimes only on params that passed validation.
struct RopeTypeRow {
  RopeType type;
  std::string_view name;  // as HF spells rope_type
  /// The rope_parameters / rope_scaling keys this type reads, besides rope_type, type, rope_theta and
  /// partial_rotary_factor; any other key present is reported as unused by ParseHfRopeConfig.
  std::vector<std::string_view> keys;
  /// Where ParseHfRopeConfig reads original_max_position_embeddings (only for a row whose keys list it): true
  /// when the top-level attribute wins over the nested key (transformers `_compute_longrope_parameters`),
  /// false when only the nested key is read (`_compute_yarn_parameters`, `_compute_llama3_parameters`).
  bool original_top_level_first = false;
  /// The type's own checks. Errors: ConfigError naming the field and value.
  void (*validate)(const RopeParams& p);
  /// inv_freq and the attention factors (seq_len as ComputeRopeFrequencies takes it).
  RopeFrequencies (*compute)(const RopeParams& p, std::optional<int64_t> seq_len);
  /// The type's inputs to inv_freq[i], appended to a message after "rope_theta = .., rotary_dim = ..[, factor =
  /// ..]", each item led by ", "; empty when the type has none beyond those.
  std::string (*inv_freq_inputs)(const RopeParams& p, size_t i, std::optional<int64_t> seq_len);
  /// Per-pair regime, [rotary_dim/2].
  std::vector<PairRegime> (*regimes)(const RopeParams& p);
};

/// Every rope type, one row each, in RopeType order.
std::span<const RopeTypeRow* const> RopeTypeTable();

/// The row of `type`. Errors: ConfigError("rope_type has an unknown enum value") for a value outside RopeType.
const RopeTypeRow& RopeTypeRowOf(RopeType type);

}  // namespace posenc
