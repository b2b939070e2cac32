#include "posenc/rope/params.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"

namespace posenc {
namespace {

struct TypeName {
  RopeType type;
  std::string_view name;
};
constexpr TypeName kTypeNames[] = {
    {RopeType::kDefault, "default"}, {RopeType::kLinear, "linear"},   {RopeType::kNtk, "ntk"},
    {RopeType::kDynamic, "dynamic"}, {RopeType::kYarn, "yarn"},       {RopeType::kLlama3, "llama3"},
    {RopeType::kLongrope, "longrope"},
};

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

// A double that the frequency code rounds to float32 must stay finite there (1e39 becomes inf).
bool FiniteInFloat32(double v) { return std::isfinite(static_cast<float>(v)); }

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

}  // namespace

std::string_view RopeTypeName(RopeType type) {
  for (const auto& t : kTypeNames) {
    if (t.type == type) return t.name;
  }
  return "unknown";
}

RopeType ParseRopeType(std::string_view name) {
  for (const auto& t : kTypeNames) {
    if (t.name == name) return t.type;
  }
  throw ConfigError(fmt::format(
      "rope_type must be one of default, linear, ntk, dynamic, yarn, llama3, longrope, got '{}'", name));
}

void ValidateRopeParams(const RopeParams& p) {
  if (p.head_dim <= 0) throw ConfigError(fmt::format("head_dim must be > 0, got {}", p.head_dim));
  if (p.head_dim > kMaxHeadDim || p.rotary_dim > kMaxHeadDim) {
    const int64_t d = std::max(p.head_dim, p.rotary_dim);
    throw ConfigError(fmt::format(
        "{} must be <= {} (real models use 64-256 channels per head), got {}: inv_freq alone would need {} and "
        "each position's cos/sin row {}",
        p.head_dim > kMaxHeadDim ? "head_dim" : "rotary_dim", kMaxHeadDim, d,
        FormatBytes(static_cast<double>(d / 2) * 4.0), FormatBytes(static_cast<double>(d) * 4.0)));
  }
  const int64_t rotary_dim = p.RotaryDim();
  if (rotary_dim < 2 || rotary_dim % 2 != 0) {
    throw ConfigError(fmt::format("rotary_dim must be even and >= 2 (channels rotate in pairs), got {}",
                                  rotary_dim));
  }
  if (rotary_dim > p.head_dim) {
    throw ConfigError(fmt::format("rotary_dim must be <= head_dim = {}, got {}", p.head_dim, rotary_dim));
  }
  if (!std::isfinite(p.rope_theta) || p.rope_theta <= 1.0 || !FiniteInFloat32(p.rope_theta)) {
    throw ConfigError(fmt::format(
        "rope_theta must be a number > 1 that is finite in float32 (the base of inv_freq = rope_theta^(-2i/d), "
        "rounded to float32 as HF does), got {}",
        p.rope_theta));
  }
  if (p.max_position_embeddings < 0) {
    throw ConfigError(fmt::format("max_position_embeddings must be >= 0, got {}", p.max_position_embeddings));
  }
  switch (p.rope_type) {
    case RopeType::kDefault:
      break;
    case RopeType::kLinear:
    case RopeType::kNtk:
      RequireFactor(p, true);
      break;
    case RopeType::kDynamic:
      RequireFactor(p, true);
      if (p.max_position_embeddings < 1) {
        throw ConfigError(fmt::format(
            "max_position_embeddings must be >= 1 for rope_type 'dynamic' (the length where scaling starts), "
            "got {}", p.max_position_embeddings));
      }
      break;
    case RopeType::kYarn:
      RequireOriginal(p);
      if (!p.factor && p.max_position_embeddings < 1) {
        throw ConfigError("rope_parameters.factor is required for rope_type 'yarn' when "
                          "max_position_embeddings is not given (factor defaults to L / L0)");
      }
      RequireFactor(p, false);
      RequireOptionalNonNegative("rope_parameters.attention_factor", p.attention_factor);
      RequireOptionalNonNegative("rope_parameters.beta_fast", p.beta_fast);
      RequireOptionalNonNegative("rope_parameters.beta_slow", p.beta_slow);
      RequireOptionalNonNegative("rope_parameters.mscale", p.mscale);
      RequireOptionalNonNegative("rope_parameters.mscale_all_dim", p.mscale_all_dim);
      if (p.attention_factor && *p.attention_factor == 0.0) {
        throw ConfigError("rope_parameters.attention_factor must be > 0 (it multiplies cos and sin), got 0");
      }
      break;
    case RopeType::kLlama3:
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
      break;
    case RopeType::kLongrope:
      RequireOriginal(p);
      if (!p.factor && p.max_position_embeddings < 1) {
        throw ConfigError("rope_parameters.factor is required for rope_type 'longrope' when "
                          "max_position_embeddings is not given (factor defaults to L / L0)");
      }
      RequireFactor(p, false);
      RequireOptionalNonNegative("rope_parameters.attention_factor", p.attention_factor);
      RequireFactorList("short_factor", p.short_factor, rotary_dim / 2);
      RequireFactorList("long_factor", p.long_factor, rotary_dim / 2);
      break;
  }
}

}  // namespace posenc
