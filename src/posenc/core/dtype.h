// Storage element types and their conversions to and from float32 (all math in posenc is float32 or wider).
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

namespace posenc {

/// Element type of a tensor in memory. Math is always done in float32.
enum class DType { kF32, kBF16, kF16 };

/// "float32", "bfloat16" or "float16".
std::string_view DTypeName(DType dtype);

/// Size in bytes of one element.
inline constexpr int DTypeSize(DType dtype) { return dtype == DType::kF32 ? 4 : 2; }

/// bfloat16 bits -> float32 (exact).
inline float BF16ToF32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// float32 -> bfloat16 bits, round to nearest even; NaN stays NaN (quiet), infinities stay infinite.
inline uint16_t F32ToBF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

/// IEEE binary16 bits -> float32 (exact; subnormals, infinities and NaN handled).
float F16ToF32(uint16_t bits);

/// float32 -> IEEE binary16 bits, round to nearest even; overflow gives infinity, NaN stays NaN.
uint16_t F32ToF16(float f);

}  // namespace posenc
