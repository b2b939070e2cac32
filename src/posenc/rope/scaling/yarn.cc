// YaRN (Peng et al. 2023, "YaRN: Efficient Context Window Extension of Large Language Models"):
// NTK-by-parts interpolation (Sec. 3.2) and the attention temperature sqrt(1/t) = 0.1 ln(s) + 1 (Sec. 3.4),
// exactly as transformers v5 `_compute_yarn_parameters`, float32 operation order included.
#include <algorithm>
#include <cmath>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc {
namespace {

// Pair index at which a wavelength makes `num_rotations` turns over L0 tokens (Sec. 3.2, eq. 17-18).
double CorrectionDim(double num_rotations, double dim, double base, double L0) {
  return (dim * std::log(L0 / (num_rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
}

// HF `or` defaults: a 0 or absent beta means the default.
double OrDefault(const std::optional<double>& v, double def) { return (v && *v != 0.0) ? *v : def; }

}  // namespace

YarnRange YarnCorrectionRange(const RopeParams& p) {
  if (!p.original_max_position_embeddings || *p.original_max_position_embeddings < 1) {
    throw ConfigError("original_max_position_embeddings must be >= 1 for the yarn correction range, got none");
  }
  const double dim = static_cast<double>(p.RotaryDim());
  const double L0 = static_cast<double>(*p.original_max_position_embeddings);
  double low = CorrectionDim(OrDefault(p.beta_fast, 32.0), dim, p.rope_theta, L0);
  double high = CorrectionDim(OrDefault(p.beta_slow, 1.0), dim, p.rope_theta, L0);
  if (p.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  return {std::max(low, 0.0), std::min(high, dim - 1.0)};  // HF clamps to dim - 1 (not dim/2 - 1)
}

namespace scaling {

double GetMscale(double scale, double mscale) {
  if (scale <= 1.0) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

double FactorOrRatio(const RopeParams& p) {
  if (p.factor) return *p.factor;
  return static_cast<double>(p.max_position_embeddings) /
         static_cast<double>(*p.original_max_position_embeddings);
}

namespace {

void Validate(const RopeParams& p) {
  RequireLengthsAndFactor(p);
  RequireOptionalNonNegative("rope_parameters.beta_fast", p.beta_fast);
  RequireOptionalNonNegative("rope_parameters.beta_slow", p.beta_slow);
  RequireOptionalNonNegative("rope_parameters.mscale", p.mscale);
  RequireOptionalNonNegative("rope_parameters.mscale_all_dim", p.mscale_all_dim);
  if (p.attention_factor && *p.attention_factor == 0.0) {
    throw ConfigError("rope_parameters.attention_factor must be > 0 (it multiplies cos and sin), got 0");
  }
}

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t>) {
  const int64_t dim = p.RotaryDim();
  const double factor = FactorOrRatio(p);
  RopeFrequencies f;
  const bool both_mscales = p.mscale && *p.mscale != 0.0 && p.mscale_all_dim && *p.mscale_all_dim != 0.0;
  if (p.attention_factor) {
    f.attention_factor = *p.attention_factor;  // explicit value wins, verbatim, applied once
  } else if (both_mscales) {
    f.attention_factor = GetMscale(factor, *p.mscale) / GetMscale(factor, *p.mscale_all_dim);
  } else {
    f.attention_factor = GetMscale(factor);
  }
  if (p.mscale_all_dim && *p.mscale_all_dim != 0.0) {
    // DeepSeek-V3 attention: softmax scale = qk_head_dim^-0.5 * get_mscale(factor, mscale_all_dim)^2.
    const double m = GetMscale(factor, *p.mscale_all_dim);
    f.softmax_scale_multiplier = m * m;
  }

  YarnRange range = YarnCorrectionRange(p);
  if (range.low == range.high) range.high += 0.001;  // HF linear_ramp_factor: avoid a zero division
  const float low32 = static_cast<float>(range.low);
  const float span32 = static_cast<float>(range.high - range.low);  // Python double, then float32
  const float base32 = static_cast<float>(p.rope_theta);
  const float factor32 = static_cast<float>(factor);
  f.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float pos_freq = static_cast<float>(std::pow(static_cast<double>(base32), static_cast<double>(exponent)));
    const float extrapolation = 1.0f / pos_freq;
    const float interpolation = 1.0f / (factor32 * pos_freq);
    float ramp = (static_cast<float>(i) - low32) / span32;
    ramp = std::fmin(std::fmax(ramp, 0.0f), 1.0f);
    const float extrapolation_factor = 1.0f - ramp;
    f.inv_freq[static_cast<size_t>(i)] =
        interpolation * (1.0f - extrapolation_factor) + extrapolation * extrapolation_factor;
  }
  return f;
}

std::string Inputs(const RopeParams& p, size_t, std::optional<int64_t>) {
  return fmt::format(", beta_fast = {}, beta_slow = {}", p.beta_fast.value_or(32.0), p.beta_slow.value_or(1.0));
}

// The ramp of Compute over the correction range: 0 kept (extrapolated), 1 interpolated, between blended.
std::vector<PairRegime> Regimes(const RopeParams& p) {
  const int64_t half = p.RotaryDim() / 2;
  YarnRange r = YarnCorrectionRange(p);
  if (r.low == r.high) r.high += 0.001;
  std::vector<PairRegime> out(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const double ramp = (static_cast<double>(i) - r.low) / (r.high - r.low);
    out[static_cast<size_t>(i)] = ramp <= 0.0 ? PairRegime::kKept
                                  : ramp >= 1.0 ? PairRegime::kInterpolated
                                                : PairRegime::kBlended;
  }
  return out;
}

}  // namespace

const RopeTypeRow& YarnRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kYarn,
      .name = "yarn",
      .keys = {"factor", "original_max_position_embeddings", "attention_factor", "beta_fast", "beta_slow", "mscale",
               "mscale_all_dim", "truncate"},
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = Inputs,
      .regimes = Regimes,
  };
  return kRow;
}

}  // namespace scaling
}  // namespace posenc
