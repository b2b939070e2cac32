// Field checks shared by the rope types' validate functions.
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {
namespace {

// A double that the frequency code rounds to float32 must stay finite there (1e39 becomes inf).
bool FiniteInFloat32(double v) { return std::isfinite(static_cast<float>(v)); }

}  // namespace

void RequireFinitePositive(const char* field, double value) {
  if (!std::isfinite(value) || value <= 0.0) {
    throw ConfigError(fmt::format("{} must be a finite number > 0, got {}", field, value));
  }
}

void RequireOptionalNonNegative(const char* field, const std::optional<double>& value) {
  if (value && (!std::isfinite(*value) || *value < 0.0)) {
    throw ConfigError(fmt::format("{} must be a finite number >= 0, got {}", field, *value));
  }
}

void RequireFactor(const RopeParams& p, bool required) {
  if (!p.factor) {
    if (required) {
      throw ConfigError(fmt::format("rope_parameters.factor is required for rope_type '{}'",
                                    RopeTypeName(p.rope_type)));
    }
    // yarn / longrope: the factor is implied by the lengths; it obeys the rule an explicit one does.
    if (p.original_max_position_embeddings && *p.original_max_position_embeddings >= 1 &&
        p.max_position_embeddings < *p.original_max_position_embeddings) {
      throw ConfigError(fmt::format(
          "rope_parameters.factor is not given, and the factor it defaults to, max_position_embeddings / "
          "original_max_position_embeddings = {} / {}, is below 1 (an explicit factor below 1 is refused too: it "
          "shrinks the context)",
          p.max_position_embeddings, *p.original_max_position_embeddings));
    }
    return;
  }
  if (!std::isfinite(*p.factor) || *p.factor < 1.0 || !FiniteInFloat32(*p.factor)) {
    throw ConfigError(fmt::format(
        "rope_parameters.factor must be a finite number >= 1 (a factor below 1 shrinks the context; it is used "
        "in float32 too), got {}",
        *p.factor));
  }
}

void RequireOriginal(const RopeParams& p) {
  if (!p.original_max_position_embeddings || *p.original_max_position_embeddings < 1) {
    throw ConfigError(fmt::format(
        "original_max_position_embeddings must be >= 1 for rope_type '{}', got {}", RopeTypeName(p.rope_type),
        p.original_max_position_embeddings ? std::to_string(*p.original_max_position_embeddings) : "none"));
  }
}

void RequireFactorList(const char* field, const std::vector<double>& list, int64_t half) {
  if (static_cast<int64_t>(list.size()) != half) {
    throw ConfigError(fmt::format("rope_parameters.{} must have rotary_dim/2 = {} entries, got {}", field, half,
                                  list.size()));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    const float f32 = static_cast<float>(list[i]);  // HF: torch.tensor(list, dtype=float32)
    if (!std::isfinite(list[i]) || list[i] <= 0.0 || !std::isfinite(f32) || !(f32 > 0.0f)) {
      throw ConfigError(fmt::format(
          "rope_parameters.{}[{}] must be a number > 0 that is finite and non-zero in float32 (where inv_freq "
          "divides by it), got {}{}",
          field, i, list[i], std::isfinite(list[i]) && list[i] > 0.0 ? fmt::format(" (float32: {})", f32) : ""));
    }
  }
}

void RequireLengthsAndFactor(const RopeParams& p) {
  RequireOriginal(p);
  if (!p.factor && p.max_position_embeddings < 1) {
    throw ConfigError(fmt::format("rope_parameters.factor is required for rope_type '{}' when "
                                  "max_position_embeddings is not given (factor defaults to L / L0)",
                                  RopeTypeName(p.rope_type)));
  }
  RequireFactor(p, false);
  RequireOptionalNonNegative("rope_parameters.attention_factor", p.attention_factor);
}

}  // namespace posenc::scaling
