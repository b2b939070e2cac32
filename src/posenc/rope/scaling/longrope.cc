// LongRoPE (Ding et al. 2024, "LongRoPE: Extending LLM Context Window Beyond 2 Million Tokens"; Phi-3):
// per-pair rescale factors, the long set when the sequence is longer than L0, the short set otherwise;
// attention factor sqrt(1 + ln(factor) / ln(L0)). HF `_compute_longrope_parameters`.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {
namespace {

void Validate(const RopeParams& p) {
  RequireLengthsAndFactor(p);
  RequireFactorList("short_factor", p.short_factor, p.RotaryDim() / 2);
  RequireFactorList("long_factor", p.long_factor, p.RotaryDim() / 2);
}

RopeFrequencies Compute(const RopeParams& p, std::optional<int64_t> seq_len) {
  const int64_t dim = p.RotaryDim();
  const double L0 = static_cast<double>(*p.original_max_position_embeddings);
  const double factor = FactorOrRatio(p);
  RopeFrequencies f;
  if (p.attention_factor) {
    f.attention_factor = *p.attention_factor;
  } else {
    f.attention_factor = factor <= 1.0 ? 1.0 : std::sqrt(1.0 + std::log(factor) / std::log(L0));
  }
  // Strict: seq_len = max position + 1, so position L0 - 1 still uses the short factors.
  const bool use_long = seq_len && static_cast<double>(*seq_len) > L0;
  const std::vector<double>& ext = use_long ? p.long_factor : p.short_factor;
  const float base32 = static_cast<float>(p.rope_theta);
  f.inv_freq.resize(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(base32), static_cast<double>(exponent)));
    const float ext32 = static_cast<float>(ext[static_cast<size_t>(i)]);  // torch.tensor(..., float32)
    f.inv_freq[static_cast<size_t>(i)] = 1.0f / (ext32 * power);
  }
  return f;
}

std::string Inputs(const RopeParams& p, size_t i, std::optional<int64_t> seq_len) {
  const bool use_long = seq_len && p.original_max_position_embeddings &&
                        *seq_len > *p.original_max_position_embeddings;
  const std::vector<double>& list = use_long ? p.long_factor : p.short_factor;
  if (i >= list.size()) return {};
  return fmt::format(", {}[{}] = {}", use_long ? "long_factor" : "short_factor", i, list[i]);
}

}  // namespace

const RopeTypeRow& LongropeRow() {
  static const RopeTypeRow kRow{
      .type = RopeType::kLongrope,
      .name = "longrope",
      .keys = {"factor", "original_max_position_embeddings", "attention_factor", "short_factor", "long_factor"},
      .original_top_level_first = true,
      .validate = Validate,
      .compute = Compute,
      .inv_freq_inputs = Inputs,
      .regimes = AllKept,
  };
  return kRow;
}

}  // namespace posenc::scaling
