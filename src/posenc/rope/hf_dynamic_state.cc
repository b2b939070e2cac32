#include "posenc/rope/hf_dynamic_state.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

HfDynamicRopeState::HfDynamicRopeState(RopeParams params) : params_(std::move(params)) {
  if (params_.rope_type != RopeType::kDynamic && params_.rope_type != RopeType::kLongrope) {
    throw ConfigError(fmt::format("HfDynamicRopeState needs rope_type dynamic or longrope, got '{}'",
                                  RopeTypeName(params_.rope_type)));
  }
  original_ = ComputeRopeFrequencies(params_);
  current_ = original_;
  original_max_seq_len_ = params_.max_position_embeddings;
  max_seq_len_cached_ = original_max_seq_len_;
}

const RopeFrequencies& HfDynamicRopeState::Update(int64_t seq_len) {
  if (seq_len < 1) throw RangeError(fmt::format("seq_len must be >= 1 (largest position id + 1), got {}", seq_len));
  if (params_.rope_type == RopeType::kLongrope) {
    const int64_t L0 = *params_.original_max_position_embeddings;
    // HF installs the long table computed at seq_len = L0 + 1, else restores the init (short) table.
    current_ = seq_len > L0 ? ComputeRopeFrequencies(params_, L0 + 1) : original_;
    return current_;
  }
  if (seq_len > max_seq_len_cached_) {  // growth
    current_ = ComputeRopeFrequencies(params_, seq_len);
    max_seq_len_cached_ = seq_len;
  }
  if (seq_len < original_max_seq_len_ && max_seq_len_cached_ > original_max_seq_len_) {  // reset
    current_ = original_;
    max_seq_len_cached_ = original_max_seq_len_;
  }
  return current_;
}

}  // namespace posenc
