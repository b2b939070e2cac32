// cos/sin tables for RoPE: computed on the fly for given position ids, or cached over [0, L).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/core/rope_enums.h"
#include "posenc/rope/frequencies.h"

namespace posenc {

/// "exact" or "hf".
const char* RopePrecisionName(RopePrecision precision);

/// cos and sin of each (row, pair): two row-major float32 arrays [n_rows, half], half = rotary_dim / 2.
/// Row r holds the angles of the position that row stands for (see ComputeCosSin / RopeCache).
struct CosSinTable {
  std::vector<float> cos;  // [n_rows, half]
  std::vector<float> sin;  // [n_rows, half]
  int64_t n_rows = 0;
  int64_t half = 0;        // rotary_dim / 2
};

/// A read-only view of a CosSinTable (or any caller-owned pair of [n_rows, half] float32 arrays).
struct CosSinView {
  const float* cos = nullptr;  // [n_rows, half], row stride `half`
  const float* sin = nullptr;  // [n_rows, half]
  int64_t n_rows = 0;
  int64_t half = 0;
};

inline CosSinView View(const CosSinTable& t) { return {t.cos.data(), t.sin.data(), t.n_rows, t.half}; }

/// cos/sin for arbitrary int64 position ids: row t of the result is position_ids[t].
///
/// Shapes:  position_ids [n]; returns [n, rotary_dim/2] (HF's cos/sin are cat(table, table) of this).
/// Units:   angles in radians; positions in tokens (0-based; negative positions are allowed and rotate
///          backwards, which un-rotates).
/// Errors:  RangeError if |position| > 2^40 (beyond it even kExact's long double product is inexact);
///          the message names the index and the position.
/// Source:  transformers `LlamaRotaryEmbedding.forward` (v5) for kHf; see RopePrecision.
CosSinTable ComputeCosSin(const RopeFrequencies& freqs, std::span<const int64_t> position_ids,
                          RopePrecision precision = RopePrecision::kExact,
                          AttentionFold fold = AttentionFold::kFolded);

/// A cos/sin table over positions [0, length) that grows on demand. Row p is position p. Growing appends
/// rows computed exactly as ComputeCosSin would; rows never change once computed, and nothing else is
/// stored, so a table is never stale: the frequencies are fixed at construction (a dynamic or longrope
/// table for another sequence length is another RopeCache).
class RopeCache {
 public:
  /// Errors: ShapeError if freqs.inv_freq is empty.
  explicit RopeCache(RopeFrequencies freqs, RopePrecision precision = RopePrecision::kExact,
                     AttentionFold fold = AttentionFold::kFolded);

  /// Makes rows [0, length) available. Amortised O(1) per row (capacity doubles).
  /// Errors: RangeError if length < 0 or > 2^31.
  void Reserve(int64_t length);

  /// Makes every position in `position_ids` available (grows to max + 1), then returns the view.
  /// Errors: RangeError naming the position if one is negative (a cache holds only [0, L)).
  CosSinView Covering(std::span<const int64_t> position_ids);

  /// The rows computed so far, [0, length()).
  CosSinView view() const;
  int64_t length() const { return table_.n_rows; }
  const RopeFrequencies& frequencies() const { return freqs_; }
  RopePrecision precision() const { return precision_; }
  AttentionFold fold() const { return fold_; }

 private:
  RopeFrequencies freqs_;
  RopePrecision precision_;
  AttentionFold fold_;
  CosSinTable table_;
};

}  // namespace posenc
