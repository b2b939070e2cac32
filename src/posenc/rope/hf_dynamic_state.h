// Opt-in emulation of Hugging Face's stateful `dynamic_rope_update` (for bit-parity with HF runs only).
#pragma once

#include <cstdint>

#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"

namespace posenc {

/// Reproduces the table a transformers `RotaryEmbedding` module would use for a sequence of calls, including
/// HF's history dependence: for rope_type dynamic the table grows with the longest sequence seen and is only
/// reset when a call is shorter than max_position_embeddings after having grown (a call of exactly that
/// length keeps the grown table); for longrope each call picks long (seq_len > L0) or short factors.
///
/// posenc's own API is stateless (ComputeRopeFrequencies(params, seq_len)); this caller-owned object exists
/// only to reproduce HF numbers, and its state is explicit. It is the history dependence behind the stale-table bug
/// (transformers issue #25306).
/// Units:   seq_len = largest position id of the call + 1, tokens.
/// Errors:  ConfigError if params is not dynamic or longrope (or invalid); RangeError if seq_len < 1.
/// Source:  transformers v5 `modeling_rope_utils.dynamic_rope_update` (`dynamic_frequency_update`,
///          `longrope_frequency_update`).
class HfDynamicRopeState {
 public:
  explicit HfDynamicRopeState(RopeParams params);

  /// Applies one call's update and returns the table that call uses.
  const RopeFrequencies& Update(int64_t seq_len);

  const RopeFrequencies& frequencies() const { return current_; }
  int64_t max_seq_len_cached() const { return max_seq_len_cached_; }

 private:
  RopeParams params_;
  RopeFrequencies original_;  // the init table (no seq_len)
  RopeFrequencies current_;
  int64_t original_max_seq_len_ = 0;
  int64_t max_seq_len_cached_ = 0;
};

}  // namespace posenc
