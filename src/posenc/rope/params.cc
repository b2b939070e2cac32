#include "posenc/rope/params.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/rope/rope_types.h"

namespace posenc {
namespace {

// A double that the frequency code rounds to float32 must stay finite there (1e39 becomes inf).
bool FiniteInFloat32(double v) { return std::isfinite(static_cast<float>(v)); }

}  // namespace

std::string_view RopeTypeName(RopeType type) {
  for (const RopeTypeRow* row : RopeTypeTable()) {
    if (row->type == type) return row->name;
  }
  return "unknown";
}

RopeType ParseRopeType(std::string_view name) {
  std::string names;
  for (const RopeTypeRow* row : RopeTypeTable()) {
    if (row->name == name) return row->type;
    names += fmt::format("{}{}", names.empty() ? "" : ", ", row->name);
  }
  throw ConfigError(fmt::format("rope_type must be one of {}, got '{}'", names, name));
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
  RopeTypeRowOf(p.rope_type).validate(p);
}

}  // namespace posenc
