#include "posenc/rope/frequencies.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

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

namespace {

// The inputs that inv_freq[i] is formed from, per rope type, for a message ("rope_theta = 10000, factor = 4").
std::string InvFreqInputs(const RopeParams& p, size_t i, std::optional<int64_t> seq_len) {
  std::string out = fmt::format("rope_theta = {}, rotary_dim = {}", p.rope_theta, p.RotaryDim());
  if (p.factor) out += fmt::format(", factor = {}", *p.factor);
  switch (p.rope_type) {
    case RopeType::kDynamic:
      out += fmt::format(", max_position_embeddings = {}, seq_len = {}", p.max_position_embeddings,
                         seq_len ? std::to_string(*seq_len) : "none");
      break;
    case RopeType::kYarn:
      out += fmt::format(", beta_fast = {}, beta_slow = {}", p.beta_fast.value_or(32.0), p.beta_slow.value_or(1.0));
      break;
    case RopeType::kLlama3:
      out += fmt::format(", low_freq_factor = {}, high_freq_factor = {}", p.low_freq_factor.value_or(0.0),
                         p.high_freq_factor.value_or(0.0));
      break;
    case RopeType::kLongrope: {
      const bool use_long = seq_len && p.original_max_position_embeddings &&
                            *seq_len > *p.original_max_position_embeddings;
      const std::vector<double>& list = use_long ? p.long_factor : p.short_factor;
      if (i < list.size()) out += fmt::format(", {}[{}] = {}", use_long ? "long_factor" : "short_factor", i, list[i]);
      break;
    }
    default: break;
  }
  return out;
}

// Every derived quantity must be finite in the type it is used in: inv_freq and the angle pos * inv_freq in
// float32 (HF precision forms the angle in float32, for positions up to 2^40, ComputeCosSin's limit), the
// attention factor (folded into float32 cos/sin) and the softmax-scale multiplier (a float32 in attention).
void CheckDerived(const RopeParams& p, const RopeFrequencies& f, std::optional<int64_t> seq_len) {
  constexpr double kMaxPosition = 1099511627776.0;  // 2^40
  constexpr double kFloatMax = 3.4028234663852886e38;
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    const float v = f.inv_freq[i];
    if (!std::isfinite(v) || !(v > 0.0f)) {
      throw ConfigError(fmt::format("rope_type '{}' gives inv_freq[{}] = {} in float32, not a finite positive "
                                    "frequency; it is formed from {}",
                                    RopeTypeName(p.rope_type), i, v, InvFreqInputs(p, i, seq_len)));
    }
    if (static_cast<double>(v) * kMaxPosition > kFloatMax) {
      throw ConfigError(fmt::format("rope_type '{}' gives inv_freq[{}] = {} rad/token: the angle position * "
                                    "inv_freq overflows float32 before position 2^40; it is formed from {}",
                                    RopeTypeName(p.rope_type), i, v, InvFreqInputs(p, i, seq_len)));
    }
  }
  const float attention32 = static_cast<float>(f.attention_factor);
  if (!std::isfinite(attention32) || !(attention32 > 0.0f)) {
    throw ConfigError(fmt::format(
        "rope_type '{}' gives attention_factor = {}, not a finite positive float32; it is formed from "
        "attention_factor = {}, factor = {}, mscale = {}, mscale_all_dim = {}, original_max_position_embeddings = {}",
        RopeTypeName(p.rope_type), f.attention_factor, p.attention_factor ? fmt::format("{}", *p.attention_factor) : "none",
        p.factor.value_or(1.0), p.mscale.value_or(0.0), p.mscale_all_dim.value_or(0.0),
        p.original_max_position_embeddings.value_or(0)));
  }
  const float softmax32 = static_cast<float>(f.softmax_scale_multiplier);
  if (!std::isfinite(softmax32) || !(softmax32 > 0.0f)) {
    throw ConfigError(fmt::format(
        "rope_type '{}' gives a softmax-scale multiplier get_mscale(factor, mscale_all_dim)^2 = {}, not a finite "
        "positive float32; it is formed from factor = {}, mscale_all_dim = {}",
        RopeTypeName(p.rope_type), f.softmax_scale_multiplier, p.factor.value_or(1.0), p.mscale_all_dim.value_or(0.0)));
  }
}

RopeFrequencies ComputeUnchecked(const RopeParams& params, std::optional<int64_t> seq_len) {
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

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const RopeParams& params, std::optional<int64_t> seq_len) {
  ValidateRopeParams(params);
  if (seq_len && *seq_len < 1) {
    throw RangeError(fmt::format("seq_len must be >= 1 (largest position id + 1), got {}", *seq_len));
  }
  RopeFrequencies f = ComputeUnchecked(params, seq_len);
  CheckDerived(params, f, seq_len);
  return f;
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
