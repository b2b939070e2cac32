// Everything `posenc inspect` shows about one rotary embedding, computed by the library.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"

namespace posenc {

/// The resolved view of a RopeParams: frequencies, wavelengths, regimes and cos/sin at chosen positions.
struct RopeReport {
  RopeParams params;                   // as given (validated)
  std::optional<int64_t> seq_len;      // the sequence length used for dynamic / longrope, tokens
  RopePrecision precision = RopePrecision::kExact;
  RopeFrequencies frequencies;         // inv_freq [rotary_dim/2] rad/token, attention_factor, softmax multiplier
  std::vector<double> wavelength;      // [rotary_dim/2], tokens per full turn: 2*pi / inv_freq
  std::vector<PairRegime> regimes;     // [rotary_dim/2]
  std::vector<int64_t> positions;      // [n]
  CosSinTable cos_sin;                 // [n, rotary_dim/2], attention_factor folded in
};

/// Resolves `params` (at seq_len for dynamic / longrope) and computes cos/sin at `positions`.
/// Errors: as ComputeRopeFrequencies and ComputeCosSin; ConfigError if the cos/sin rows of all positions would
/// need more than the machine's memory. Source: see those functions.
RopeReport InspectRope(const RopeParams& params, std::optional<int64_t> seq_len,
                       const std::vector<int64_t>& positions, RopePrecision precision);

}  // namespace posenc
