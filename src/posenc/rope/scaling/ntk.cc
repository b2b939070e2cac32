// static NTK-aware scaling (bloc97, "NTK-Aware Scaled RoPE", 2023; YaRN paper Sec. 3.1, eq. 16):
// rope_theta' = rope_theta * factor^(d / (d - 2)), so the lowest frequency is divided by exactly `factor`
// while the highest (pair 0) is unchanged. Not the same as a plain rope_theta override "base x factor".
#include <cmath>

#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {
namespace {

void Validate(const RopeParams& p) { RequireFactor(p, true); }

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t>) {
  const double d = static_cast<double>(p.RotaryDim());
  const double base = p.rope_theta * std::pow(*p.factor, d / (d - 2.0));
  return {BaseInvFreq(base, p.RotaryDim()), 1.0, 1.0};
}

}  // namespace

const RopeTypeRow& NtkRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kNtk,
      .name = "ntk",
      .keys = {"factor"},
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = NoInputs,
      .regimes = AllKept,
  };
  return kRow;
}

}  // namespace posenc::scaling
