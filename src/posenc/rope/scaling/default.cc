// default RoPE (Su et al. 2021, Sec. 3.2.2): inv_freq_i = rope_theta^(-2i/d).
#include <cmath>

#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {

std::vector<float> BaseInvFreq(double base, int64_t dim) {
  // HF: 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim)), all in float32:
  // the exponent is a float32 quotient, the Python-float base is rounded to float32 before pow, and the
  // reciprocal is a float32 division. pow is evaluated in double and rounded once (correctly rounded in
  // practice, as torch's float32 pow is within 1 ulp of it).
  const float base32 = static_cast<float>(base);
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base32), static_cast<double>(exponent)));
    inv[static_cast<size_t>(i)] = 1.0f / power;
  }
  return inv;
}

void NoChecks(const RopeParams&) {}

std::string NoInputs(const RopeParams&, size_t, std::optional<int64_t>) { return {}; }

std::vector<PairRegime> AllKept(const RopeParams& p) {
  return std::vector<PairRegime>(static_cast<size_t>(p.RotaryDim() / 2), PairRegime::kKept);
}

namespace {

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t>) {
  return {BaseInvFreq(p.rope_theta, p.RotaryDim()), 1.0, 1.0};
}

}  // namespace

const RopeTypeRow& DefaultRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kDefault,
      .name = "default",
      .keys = {},
      .validate = NoChecks,
      .compute = Compute,
      .inv_freq_inputs = NoInputs,
      .regimes = AllKept,
  };
  return kRow;
}

}  // namespace posenc::scaling
