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
  CosSinTable cos_sin;                 // [n, rotary_dim/2], attention_factor (and magnitude) folded in
  std::vector<float> freq_factors;     // [rotary_dim/2] divisors applied to inv_freq (GGUF rope_freqs), or empty
  double magnitude = 1.0;              // extra cos/sin multiplier (GGUF rope.scaling.attn_factor), 1 if none
};

/// Resolves `params` (at seq_len for dynamic / longrope) and computes cos/sin at `positions`. A model file's own
/// per-pair divisors (`freq_factors`, llama.cpp's rope_freqs: inv_freq[i] / freq_factors[i], float32) and cos/sin
/// magnitude are applied as the model applies them, so the report shows the RoPE the file states.
/// Errors: as ComputeRopeFrequencies and ComputeCosSin; ConfigError if freq_factors has not rotary_dim / 2
/// entries, or if the cos/sin rows of all positions would need more than the machine's memory.
/// Source: see those functions; ggml_rope_ext's freq_factors.
RopeReport InspectRope(const RopeParams& params, std::optional<int64_t> seq_len,
                       const std::vector<int64_t>& positions, RopePrecision precision,
                       const std::vector<float>& freq_factors = {}, double magnitude = 1.0);

}  // namespace posenc
