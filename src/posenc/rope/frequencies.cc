#include "posenc/rope/frequencies.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/rope_types.h"
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

// The inputs that inv_freq[i] is formed from, for a message ("rope_theta = 10000, factor = 4").
std::string InvFreqInputs(const RopeParams& p, size_t i, std::optional<int64_t> seq_len) {
  std::string out = fmt::format("rope_theta = {}, rotary_dim = {}", p.rope_theta, p.RotaryDim());
  if (p.factor) out += fmt::format(", factor = {}", *p.factor);
  return out + RopeTypeRowOf(p.rope_type).inv_freq_inputs(p, i, seq_len);
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
    const std::string given = p.attention_factor ? fmt::format("{}", *p.attention_factor) : "none";
    throw ConfigError(fmt::format(
        "rope_type '{}' gives attention_factor = {}, not a finite positive float32; it is formed from "
        "attention_factor = {}, factor = {}, mscale = {}, mscale_all_dim = {}, original_max_position_embeddings = {}",
        RopeTypeName(p.rope_type), f.attention_factor, given, p.factor.value_or(1.0), p.mscale.value_or(0.0),
        p.mscale_all_dim.value_or(0.0), p.original_max_position_embeddings.value_or(0)));
  }
  const float softmax32 = static_cast<float>(f.softmax_scale_multiplier);
  if (!std::isfinite(softmax32) || !(softmax32 > 0.0f)) {
    throw ConfigError(fmt::format(
        "rope_type '{}' gives a softmax-scale multiplier get_mscale(factor, mscale_all_dim)^2 = {}, not a finite "
        "positive float32; it is formed from factor = {}, mscale_all_dim = {}",
        RopeTypeName(p.rope_type), f.softmax_scale_multiplier, p.factor.value_or(1.0),
        p.mscale_all_dim.value_or(0.0)));
  }
}

}  // namespace

RopeFrequencies ComputeRopeFrequencies(const RopeParams& params, std::optional<int64_t> seq_len) {
  ValidateRopeParams(params);
  if (seq_len && *seq_len < 1) {
    throw RangeError(fmt::format("seq_len must be >= 1 (largest position id + 1), got {}", *seq_len));
  }
  RopeFrequencies f = RopeTypeRowOf(params.rope_type).compute(params, seq_len);
  CheckDerived(params, f, seq_len);
  return f;
}

std::vector<PairRegime> PairRegimes(const RopeParams& params) {
  ValidateRopeParams(params);
  return RopeTypeRowOf(params.rope_type).regimes(params);
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
