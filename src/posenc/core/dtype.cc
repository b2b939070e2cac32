#include "posenc/core/dtype.h"

#include <cmath>
#include <limits>

namespace posenc {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "float32";
    case DType::kBF16: return "bfloat16";
    case DType::kF16: return "float16";
  }
  return "unknown";
}

float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal
  } else if (exp == 31) {
    magnitude = man ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    const uint32_t u = ((exp + 112u) << 23) | (man << 13);
    std::memcpy(&magnitude, &u, 4);
  }
  uint32_t u;
  std::memcpy(&u, &magnitude, 4);
  u |= sign;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t F32ToF16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;               // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;              // rounds to >= 65520: infinity
  if (abs < 0x38800000u) {                                    // below the smallest normal half: subnormal
    float a;
    std::memcpy(&a, &abs, 4);
    // a * 2^24 rounded to nearest even integer is the subnormal mantissa (exact in float32 arithmetic).
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  // normal: rebias exponent (127 -> 15), round mantissa 23 -> 10 bits to nearest even
  const uint32_t rounded = abs + 0xfffu + ((abs >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

}  // namespace posenc
