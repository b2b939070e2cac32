// dynamic NTK (emozilla 2023; HF `_compute_dynamic_ntk_parameters`): the NTK base grows with the sequence
// length S once S exceeds max_position_embeddings L: base' = base * ((factor*S/L) - (factor-1))^(d/(d-2)).
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc {

double DynamicNtkBase(const RopeParams& p, int64_t seq_len) {
  const double d = static_cast<double>(p.RotaryDim());
  const double L = static_cast<double>(p.max_position_embeddings);
  if (static_cast<double>(seq_len) <= L) return p.rope_theta;  // S = max(seq_len, L) = L: unchanged
  const double S = static_cast<double>(seq_len);
  const double factor = *p.factor;
  return p.rope_theta * std::pow((factor * S / L) - (factor - 1.0), d / (d - 2.0));
}

namespace scaling {
namespace {

void Validate(const RopeParams& p) {
  RequireFactor(p, true);
  if (p.max_position_embeddings < 1) {
    throw ConfigError(fmt::format(
        "max_position_embeddings must be >= 1 for rope_type 'dynamic' (the length where scaling starts), "
        "got {}", p.max_position_embeddings));
  }
}

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t> seq_len) {
  // HF computes S = max(seq_len, L) with seq_len = None meaning L; at S = L the base is unchanged.
  const int64_t S = seq_len.value_or(p.max_position_embeddings);
  return {BaseInvFreq(DynamicNtkBase(p, S), p.RotaryDim()), 1.0, 1.0};
}

std::string Inputs(const RopeParams& p, size_t, std::optional<int64_t> seq_len) {
  return fmt::format(", max_position_embeddings = {}, seq_len = {}", p.max_position_embeddings,
                     seq_len ? std::to_string(*seq_len) : "none");
}

}  // namespace

const RopeTypeRow& DynamicRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kDynamic,
      .name = "dynamic",
      .keys = {"factor"},
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = Inputs,
      .regimes = AllKept,
  };
  return kRow;
}

}  // namespace scaling
}  // namespace posenc
