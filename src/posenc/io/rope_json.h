// JSON rendering of RoPE reports (the `posenc inspect --json` format).
#pragma once

#include <nlohmann/json.hpp>

#include "posenc/rope/inspect.h"

namespace posenc {

/// Keys: rope_type, head_dim, rotary_dim, rope_theta, seq_len (or null), precision, inv_freq [rotary_dim/2],
/// wavelength [rotary_dim/2] (tokens), regime [rotary_dim/2], attention_factor, softmax_scale_multiplier,
/// positions [n], cos [n][rotary_dim/2], sin [n][rotary_dim/2] (one value per pair, attention_factor folded).
/// Numbers are written with enough digits to round-trip float32 / float64 exactly.
nlohmann::json RopeReportToJson(const RopeReport& report);

}  // namespace posenc
