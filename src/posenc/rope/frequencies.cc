#include "posenc/rope/frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc {

std::vector<float> DefaultInvFreq(double rope_theta, int64_t rotary_dim) {
  RopeParams p;
  p.rope_theta = rope_theta;
  p.head_dim = rotary_dim;
  ValidateRopeParams(p);
  return scaling::BaseInvFreq(rope_theta, rotary_dim);
}

RopeFrequencies ComputeRopeFrequencies(const RopeParams& params, std::optional<int64_t> seq_len) {
  ValidateRopeParams(params);
  if (seq_len && *seq_len < 1) {
    throw RangeError(fmt::format("seq_len must be >= 1 (largest position id + 1), got {}", *seq_len));
  }
  switch (params.rope_type) {
    case RopeType::kDefault: return scaling::ComputeDefault(params);
    case RopeType::kLinear: return scaling::ComputeLinear(params);
    case RopeType::kNtk: return scaling::ComputeNtk(params);
    case RopeType::kDynamic: return scaling::ComputeDynamic(params, seq_len);
    case RopeType::kYarn: return scaling::ComputeYarn(params);
    case RopeType::kLlama3: return scaling::ComputeLlama3(params);
    case RopeType::kLongrope: return scaling::ComputeLongrope(params, seq_len);
  }
  throw ConfigError("rope_type has an unknown enum value");
}

std::vector<PairRegime> PairRegimes(const RopeParams& params) {
  ValidateRopeParams(params);
  const int64_t half = params.RotaryDim() / 2;
  std::vector<PairRegime> out(static_cast<size_t>(half), PairRegime::kKept);
  if (params.rope_type == RopeType::kLinear) {
    std::fill(out.begin(), out.end(), PairRegime::kInterpolated);
  } else if (params.rope_type == RopeType::kYarn) {
    YarnRange r = YarnCorrectionRange(params);
    if (r.low == r.high) r.high += 0.001;
    for (int64_t i = 0; i < half; ++i) {
      const double ramp = (static_cast<double>(i) - r.low) / (r.high - r.low);
      out[static_cast<size_t>(i)] = ramp <= 0.0 ? PairRegime::kKept
                                    : ramp >= 1.0 ? PairRegime::kInterpolated
                                                  : PairRegime::kBlended;
    }
  } else if (params.rope_type == RopeType::kLlama3) {
    const std::vector<float> inv = scaling::BaseInvFreq(params.rope_theta, params.RotaryDim());
    const double L0 = static_cast<double>(*params.original_max_position_embeddings);
    const float low_w = static_cast<float>(L0 / *params.low_freq_factor);
    const float high_w = static_cast<float>(L0 / *params.high_freq_factor);
    const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
    for (int64_t i = 0; i < half; ++i) {
      const float w = two_pi / inv[static_cast<size_t>(i)];
      out[static_cast<size_t>(i)] = w > low_w    ? PairRegime::kInterpolated
                                    : w < high_w ? PairRegime::kKept
                                                 : PairRegime::kBlended;
    }
  }
  return out;
}

const char* PairRegimeName(PairRegime regime) {
  switch (regime) {
    case PairRegime::kKept: return "kept";
    case PairRegime::kBlended: return "blended";
    case PairRegime::kInterpolated: return "interpolated";
  }
  return "unknown";
}

}  // namespace posenc
