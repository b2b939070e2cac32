// Llama 3.1 frequency scaling (Meta, "The Llama 3 Herd of Models", 2024; HF `_compute_llama3_parameters`):
// wavelengths longer than L0/low_freq_factor are divided by factor, shorter than L0/high_freq_factor kept,
// the band between blended smoothly. float32 operation order as HF.
#include <cmath>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {
namespace {

void Validate(const RopeParams& p) {
  RequireFactor(p, true);
  RequireOriginal(p);
  if (!p.low_freq_factor) throw ConfigError("rope_parameters.low_freq_factor is required for rope_type 'llama3'");
  if (!p.high_freq_factor) {
    throw ConfigError("rope_parameters.high_freq_factor is required for rope_type 'llama3'");
  }
  RequireFinitePositive("rope_parameters.low_freq_factor", *p.low_freq_factor);
  RequireFinitePositive("rope_parameters.high_freq_factor", *p.high_freq_factor);
  if (*p.high_freq_factor <= *p.low_freq_factor) {
    throw ConfigError(fmt::format(
        "rope_parameters.high_freq_factor must be > low_freq_factor = {} (the smoothing divides by their "
        "difference), got {}", *p.low_freq_factor, *p.high_freq_factor));
  }
}

constexpr float kTwoPi = static_cast<float>(2.0 * std::numbers::pi);

// The band of each pair of the base table `inv`: wavelength 2pi / inv longer than L0/low_freq_factor is
// interpolated (divided by factor), shorter than L0/high_freq_factor kept, between them (ends included) blended.
// Compared in float32, as HF compares the float32 wavelength tensor with the Python-float edges.
std::vector<PairRegime> Bands(const RopeParams& p, const std::vector<float>& inv) {
  const double L0 = static_cast<double>(*p.original_max_position_embeddings);
  const float low_freq_wavelen = static_cast<float>(L0 / *p.low_freq_factor);
  const float high_freq_wavelen = static_cast<float>(L0 / *p.high_freq_factor);
  std::vector<PairRegime> out(inv.size());
  for (size_t i = 0; i < inv.size(); ++i) {
    const float wavelen = kTwoPi / inv[i];
    out[i] = wavelen > low_freq_wavelen    ? PairRegime::kInterpolated
             : wavelen < high_freq_wavelen ? PairRegime::kKept
                                           : PairRegime::kBlended;
  }
  return out;
}

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t>) {
  RopeFrequencies f{BaseInvFreq(p.rope_theta, p.RotaryDim()), 1.0, 1.0};
  const std::vector<PairRegime> bands = Bands(p, f.inv_freq);
  const double low = *p.low_freq_factor, high = *p.high_freq_factor;
  const float factor = static_cast<float>(*p.factor);
  const float L0f = static_cast<float>(static_cast<double>(*p.original_max_position_embeddings));
  const float low32 = static_cast<float>(low);
  const float band32 = static_cast<float>(high - low);
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    float& inv = f.inv_freq[i];
    const float wavelen = kTwoPi / inv;
    const float scaled = bands[i] == PairRegime::kInterpolated ? inv / factor : inv;
    const float smooth = (L0f / wavelen - low32) / band32;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    inv = bands[i] == PairRegime::kBlended ? smoothed : scaled;
  }
  return f;
}

std::string Inputs(const RopeParams& p, size_t, std::optional<int64_t>) {
  return fmt::format(", low_freq_factor = {}, high_freq_factor = {}", p.low_freq_factor.value_or(0.0),
                     p.high_freq_factor.value_or(0.0));
}

std::vector<PairRegime> Regimes(const RopeParams& p) { return Bands(p, BaseInvFreq(p.rope_theta, p.RotaryDim())); }

}  // namespace

const RopeTypeRow& Llama3Row() {
  static const RopeTypeRow kRow{
      .type = RopeType::kLlama3,
      .name = "llama3",
      .keys = {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = Inputs,
      .regimes = Regimes,
  };
  return kRow;
}

}  // namespace posenc::scaling
