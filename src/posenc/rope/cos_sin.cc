#include "posenc/rope/cos_sin.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr int64_t kMaxAbsPosition = int64_t{1} << 40;
constexpr int64_t kExactInDouble = int64_t{1} << 29;  // 24-bit inv_freq x 29-bit position fits 53 bits

void CheckPosition(int64_t index, int64_t pos) {
  if (pos > kMaxAbsPosition || pos < -kMaxAbsPosition) {
    throw RangeError(fmt::format("position_ids[{}] = {} is outside [-2^40, 2^40], where cos/sin angles are "
                                 "exact", index, pos));
  }
}

// Fills one row: cos/sin of pos * inv_freq[i] for every pair i.
void FillRow(const RopeFrequencies& f, int64_t pos, RopePrecision precision, AttentionFold fold, float* cos_row,
             float* sin_row) {
  const size_t half = f.inv_freq.size();
  const double scale = fold == AttentionFold::kFolded ? f.attention_factor : 1.0;
  if (precision == RopePrecision::kHf) {
    // HF: freqs = fl32(inv_freq * fl32(pos)); cos = fl32(cos(freqs) * fl32(attention_scaling)).
    const float pos32 = static_cast<float>(pos);
    const float scale32 = static_cast<float>(scale);
    for (size_t i = 0; i < half; ++i) {
      const float angle = f.inv_freq[i] * pos32;
      cos_row[i] = static_cast<float>(std::cos(static_cast<double>(angle))) * scale32;
      sin_row[i] = static_cast<float>(std::sin(static_cast<double>(angle))) * scale32;
    }
    return;
  }
  const bool fits_double = pos < kExactInDouble && pos > -kExactInDouble;
  for (size_t i = 0; i < half; ++i) {
    double c, s;
    if (fits_double) {
      const double angle = static_cast<double>(f.inv_freq[i]) * static_cast<double>(pos);  // exact product
      c = std::cos(angle);
      s = std::sin(angle);
    } else {
      const long double angle = static_cast<long double>(f.inv_freq[i]) * static_cast<long double>(pos);
      c = static_cast<double>(std::cos(angle));
      s = static_cast<double>(std::sin(angle));
    }
    cos_row[i] = static_cast<float>(c * scale);  // one rounding to float32
    sin_row[i] = static_cast<float>(s * scale);
  }
}

}  // namespace

const char* RopePrecisionName(RopePrecision precision) {
  return precision == RopePrecision::kExact ? "exact" : "hf";
}

CosSinTable ComputeCosSin(const RopeFrequencies& freqs, std::span<const int64_t> position_ids,
                          RopePrecision precision, AttentionFold fold) {
  CosSinTable t;
  t.half = static_cast<int64_t>(freqs.inv_freq.size());
  t.n_rows = static_cast<int64_t>(position_ids.size());
  t.cos.resize(static_cast<size_t>(t.n_rows * t.half));
  t.sin.resize(t.cos.size());
  for (int64_t r = 0; r < t.n_rows; ++r) {
    CheckPosition(r, position_ids[static_cast<size_t>(r)]);
    FillRow(freqs, position_ids[static_cast<size_t>(r)], precision, fold, t.cos.data() + r * t.half,
            t.sin.data() + r * t.half);
  }
  return t;
}

RopeCache::RopeCache(RopeFrequencies freqs, RopePrecision precision, AttentionFold fold)
    : freqs_(std::move(freqs)), precision_(precision), fold_(fold) {
  if (freqs_.inv_freq.empty()) throw ShapeError("RopeCache needs a non-empty inv_freq, got rotary_dim 0");
  table_.half = static_cast<int64_t>(freqs_.inv_freq.size());
}

void RopeCache::Reserve(int64_t length) {
  if (length < 0 || length > (int64_t{1} << 31)) {
    throw RangeError(fmt::format("RopeCache length must be in [0, 2^31], got {}", length));
  }
  if (length <= table_.n_rows) return;
  // Grow geometrically so that one-position-at-a-time decoding is amortised O(1) per position.
  const int64_t target = std::max(length, std::min<int64_t>(2 * table_.n_rows, int64_t{1} << 31));
  const size_t n = static_cast<size_t>(target * table_.half);
  table_.cos.resize(n);
  table_.sin.resize(n);
  for (int64_t p = table_.n_rows; p < target; ++p) {
    FillRow(freqs_, p, precision_, fold_, table_.cos.data() + p * table_.half, table_.sin.data() + p * table_.half);
  }
  table_.n_rows = target;
}

CosSinView RopeCache::Covering(std::span<const int64_t> position_ids) {
  int64_t max_pos = -1;
  for (size_t t = 0; t < position_ids.size(); ++t) {
    if (position_ids[t] < 0) {
      throw RangeError(fmt::format("position_ids[{}] = {} is negative; a RopeCache covers positions [0, L)", t,
                                   position_ids[t]));
    }
    max_pos = std::max(max_pos, position_ids[t]);
  }
  Reserve(max_pos + 1);
  return view();
}

CosSinView RopeCache::view() const { return View(table_); }

}  // namespace posenc
