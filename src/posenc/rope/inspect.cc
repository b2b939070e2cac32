#include "posenc/rope/inspect.h"

#include <numbers>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"

namespace posenc {

RopeReport InspectRope(const RopeParams& params, std::optional<int64_t> seq_len,
                       const std::vector<int64_t>& positions, RopePrecision precision,
                       const std::vector<float>& freq_factors, double magnitude) {
  RopeReport r;
  r.params = params;
  r.seq_len = seq_len;
  r.precision = precision;
  r.frequencies = ComputeRopeFrequencies(params, seq_len);
  const int64_t half = static_cast<int64_t>(r.frequencies.inv_freq.size());
  if (!freq_factors.empty()) {
    if (static_cast<int64_t>(freq_factors.size()) != half) {
      throw ConfigError(fmt::format("rope_freqs has {} factors, the RoPE has {} frequency pairs", freq_factors.size(),
                                    half));
    }
    for (int64_t i = 0; i < half; ++i) r.frequencies.inv_freq[static_cast<size_t>(i)] /= freq_factors[static_cast<size_t>(i)];
    r.freq_factors = freq_factors;
  }
  r.magnitude = magnitude;
  RequireMemory(SaturatingMul(SaturatingMul(static_cast<int64_t>(positions.size()), half), 8),
                fmt::format("{} positions", positions.size()),
                fmt::format("a cos/sin row of {} pairs per position", half));
  for (float inv : r.frequencies.inv_freq) r.wavelength.push_back(2.0 * std::numbers::pi / inv);
  r.regimes = PairRegimes(params);
  r.positions = positions;
  r.cos_sin = ComputeCosSin(r.frequencies, positions, precision, AttentionFold::kFolded);
  if (magnitude != 1.0) {
    for (float& v : r.cos_sin.cos) v *= static_cast<float>(magnitude);
    for (float& v : r.cos_sin.sin) v *= static_cast<float>(magnitude);
  }
  return r;
}

}  // namespace posenc
