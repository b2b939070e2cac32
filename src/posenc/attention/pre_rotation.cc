#include "posenc/attention/pre_rotation.h"

#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

bool SameFrequencies(const RopeFrequencies& a, const RopeFrequencies& b) {
  return a.inv_freq == b.inv_freq && a.attention_factor == b.attention_factor;
}

}  // namespace

PreRotationTables PreRotationTables::Build(std::span<const RopeFrequencies> row_freqs,
                                           const RopeFrequencies& shared, RopePrecision precision) {
  PreRotationTables t;
  t.half_ = static_cast<int64_t>(shared.inv_freq.size());
  if (t.half_ == 0) throw ShapeError("PreRotationTables: shared inv_freq is empty");
  const int64_t n_rows = static_cast<int64_t>(row_freqs.size());
  t.offset_.assign(static_cast<size_t>(n_rows), -1);
  int64_t total = 0;
  for (int64_t p = 0; p < n_rows; ++p) {
    const RopeFrequencies& f = row_freqs[static_cast<size_t>(p)];
    if (static_cast<int64_t>(f.inv_freq.size()) != t.half_) {
      throw ShapeError(fmt::format("PreRotationTables: row {} has {} frequencies, the shared table {}", p,
                                   f.inv_freq.size(), t.half_));
    }
    if (SameFrequencies(f, shared)) continue;
    t.offset_[static_cast<size_t>(p)] = total;
    total += 2 * t.half_ * 8 * ((p + 1 + 7) / 8);
  }
  t.data_.assign(static_cast<size_t>(total), 0.0f);
  std::vector<int64_t> positions(static_cast<size_t>(n_rows));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  const int64_t half = t.half_;
#pragma omp parallel for schedule(dynamic, 8)
  for (int64_t p = 0; p < n_rows; ++p) {
    if (t.offset_[static_cast<size_t>(p)] < 0) continue;
    // Row-major [p+1, half] from the library, repacked into key blocks [ceil((p+1)/8), 2, half, 8].
    const CosSinTable rows = ComputeCosSin(row_freqs[static_cast<size_t>(p)],
                                           std::span<const int64_t>(positions.data(), static_cast<size_t>(p + 1)),
                                           precision, AttentionFold::kFolded);
    float* out = t.data_.data() + t.offset_[static_cast<size_t>(p)];
    for (int64_t j = 0; j <= p; ++j) {
      float* block = out + (j / 8) * 2 * half * 8 + j % 8;
      for (int64_t i = 0; i < half; ++i) {
        block[i * 8] = rows.cos[static_cast<size_t>(j * half + i)];
        block[(half + i) * 8] = rows.sin[static_cast<size_t>(j * half + i)];
      }
    }
  }
  return t;
}

}  // namespace posenc
