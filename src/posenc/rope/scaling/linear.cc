// linear scaling = position interpolation (Chen et al. 2023, "Extending Context Window ... via Positional
// Interpolation", Sec. 2.2): positions / factor, done as inv_freq / factor.
#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {
namespace {

void Validate(const RopeParams& p) { RequireFactor(p, true); }

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t>) {
  RopeFrequencies f{BaseInvFreq(p.rope_theta, p.RotaryDim()), 1.0, 1.0};
  const float factor = static_cast<float>(*p.factor);  // HF: inv_freq /= factor (float32 tensor op)
  for (float& v : f.inv_freq) v = v / factor;
  return f;
}

// Every pair is interpolated: all positions are divided by factor.
std::vector<PairRegime> Regimes(const RopeParams& p) {
  return std::vector<PairRegime>(static_cast<size_t>(p.RotaryDim() / 2), PairRegime::kInterpolated);
}

}  // namespace

const RopeTypeRow& LinearRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kLinear,
      .name = "linear",
      .keys = {"factor"},
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = NoInputs,
      .regimes = Regimes,
  };
  return kRow;
}

}  // namespace posenc::scaling
