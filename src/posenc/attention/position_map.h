// The seam of the training-free position-mapping methods (Self-Extend, Dual Chunk Attention, ReRoPE, attention
// sinks, LM-Infinite):
// which positions a query and a key are rotated at, per pair, in place of their own.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

/// A training-free position map over a model's own RoPE. The score of the query at position i against the key
/// at position j (j <= i) is taken from one of n_sets() score sets, or the pair is not attended: set s rotates
/// the query at QueryPosition(s, i) and the key at KeyPosition(s, j), so their RoPE score depends on the mapped
/// relative distance QueryPosition(s, i) - KeyPosition(s, j). Set 0 keeps each pair's own distance i - j where
/// it scores (plain RoPE; Dual Chunk Attention rotates both at their offsets in a chunk). Positions are in tokens
/// and may be fractional (Leaky ReRoPE).
///
/// Implementations are immutable after construction and safe to call from several threads.
class PositionMap {
 public:
  /// The most score sets a map may use.
  static constexpr int kMaxSets = 3;

  virtual ~PositionMap() = default;

  /// The method's name as `posenc eval --methods` spells it, e.g. "self-extend".
  virtual std::string_view name() const = 0;
  /// The map's parameters as "name value" pairs, e.g. "group 4, window 128" (for reports).
  virtual std::string parameters() const = 0;
  /// Number of score sets, in [1, kMaxSets].
  virtual int n_sets() const = 0;
  /// Position the query at position `pos` is rotated at in set `set`.
  virtual double QueryPosition(int set, int64_t pos) const = 0;
  /// Position the key at position `pos` is rotated at in set `set`.
  virtual double KeyPosition(int set, int64_t pos) const = 0;
  /// Which set scores the query at query_pos against the key at key_pos (key_pos <= query_pos), or -1 when the
  /// key is not attended.
  virtual int Select(int64_t query_pos, int64_t key_pos) const = 0;
};

}  // namespace posenc
