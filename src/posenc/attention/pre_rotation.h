// Per-query-row RoPE tables for "pre-rotation" attention (dynamic scaling with keys cached unrotated).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

namespace posenc {

/// Pre-rotation semantics (YaRN paper, Peng et al. 2023, Sec. 3.3; "dynamic" in the numpy oracle): the
/// attention row of query position p uses its own frequencies theta_p (e.g. dynamic NTK for length p+1) on
/// q_p AND on every key k_j, j <= p:  score(p, j) = (R(p theta_p) q_p) . (R(j theta_p) k_j).
/// These tables hold, for each such row p, cos/sin of j * theta_p for j in [0, p]. They depend only on the
/// positions, so one set serves every window and every layer.
///
/// Rows whose frequencies equal the static ("shared") frequencies exactly (same float32 inv_freq and the same
/// attention_factor) store nothing: for them pre-rotation is the ordinary static rotation, and attention
/// takes the statically rotated q and k instead (for dynamic NTK: every row p with p + 1 <= L0).
///
/// Memory: sum over stored rows of 2 * 8 * ceil((p + 1) / 8) * half floats: 63 MB for dynamic NTK at L = 2048,
/// L0 = 512, head_dim 8; it grows as L^2 (270 MB at 4096).
class PreRotationTables {
 public:
  PreRotationTables() = default;

  /// Builds the tables for query rows p in [0, row_freqs.size()).
  ///
  /// Shapes:  row_freqs [n_rows], each with inv_freq [half]; shared.inv_freq [half].
  /// Precision: every entry is exactly what ComputeCosSin(row_freqs[p], {j}, precision, kFolded) returns.
  /// Errors:  ShapeError if a row's inv_freq size differs from shared's or is 0.
  /// Threads: rows are built in parallel with OpenMP.
  static PreRotationTables Build(std::span<const RopeFrequencies> row_freqs, const RopeFrequencies& shared,
                                 RopePrecision precision = RopePrecision::kExact);

  int64_t n_rows() const { return static_cast<int64_t>(offset_.size()); }
  int64_t half() const { return half_; }
  /// True if row p uses the static rotation (nothing stored). Precondition: 0 <= p < n_rows().
  bool shared(int64_t p) const { return offset_[static_cast<size_t>(p)] < 0; }
  /// Row p's cos/sin of j * theta_p (attention_factor folded in) for keys j in [0, p], in the key-block
  /// layout of the attention kernels: [ceil((p+1)/8), 2, half, 8]; (block b, 0, i, lane l) = cos for key
  /// 8b + l and pair i, (b, 1, i, l) = sin; lanes past key p are 0. Precondition: !shared(p).
  const float* row(int64_t p) const { return data_.data() + offset_[static_cast<size_t>(p)]; }
  /// cos (part 0) or sin (part 1) of j * theta_p for pair i, read from row(p).
  float at(int64_t p, int part, int64_t i, int64_t j) const {
    return row(p)[((j / 8) * 2 + part) * half_ * 8 + i * 8 + j % 8];
  }

 private:
  int64_t half_ = 0;
  std::vector<int64_t> offset_;  // [n_rows]: start of row p in data_, -1 when shared
  std::vector<float> data_;      // per stored row p: [ceil((p+1)/8), 2, half, 8]
};

}  // namespace posenc
