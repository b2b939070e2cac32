#include "posenc/rope/inspect.h"

#include <numbers>

#include <fmt/format.h>

#include "posenc/core/memory.h"

namespace posenc {

RopeReport InspectRope(const RopeParams& params, std::optional<int64_t> seq_len,
                       const std::vector<int64_t>& positions, RopePrecision precision) {
  RopeReport r;
  r.params = params;
  r.seq_len = seq_len;
  r.precision = precision;
  r.frequencies = ComputeRopeFrequencies(params, seq_len);
  const int64_t half = static_cast<int64_t>(r.frequencies.inv_freq.size());
  RequireMemory(SaturatingMul(SaturatingMul(static_cast<int64_t>(positions.size()), half), 8),
                fmt::format("{} positions", positions.size()),
                fmt::format("a cos/sin row of {} pairs per position", half));
  for (float inv : r.frequencies.inv_freq) r.wavelength.push_back(2.0 * std::numbers::pi / inv);
  r.regimes = PairRegimes(params);
  r.positions = positions;
  r.cos_sin = ComputeCosSin(r.frequencies, positions, precision, AttentionFold::kFolded);
  return r;
}

}  // namespace posenc
