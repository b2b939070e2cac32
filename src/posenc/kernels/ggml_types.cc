#include "posenc/kernels/ggml_types.h"

#include <array>
#include <limits>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

// Block sizes and bytes per block from ggml-common.h (QK_K = 256; ggml_half = 2 bytes):
//   block_q4_0 {d; qs[16]} = 18, block_q4_1 {d; m; qs[16]} = 20, block_q5_0 {d; qh[4]; qs[16]} = 22,
//   block_q5_1 {d; m; qh[4]; qs[16]} = 24, block_q8_0 {d; qs[32]} = 34, block_q8_1 {d; s; qs[32]} = 36,
//   block_q2_K {scales[16]; qs[64]; d; dmin} = 84, block_q3_K {hmask[32]; qs[64]; scales[12]; d} = 110,
//   block_q4_K {d; dmin; scales[12]; qs[128]} = 144, block_q5_K {d; dmin; scales[12]; qh[32]; qs[128]} = 176,
//   block_q6_K {ql[128]; qh[64]; scales[16]; d} = 210, block_q8_K {float d; qs[256]; bsums[16]} = 292,
//   block_iq4_nl {d; qs[16]} = 18, and the IQ / TQ / MXFP4 blocks as their static_asserts state.
constexpr std::array<GgmlTypeTraits, 32> kTypes = {{
    {GgmlType::kF32, "f32", 1, 4},
    {GgmlType::kF16, "f16", 1, 2},
    {GgmlType::kQ4_0, "q4_0", 32, 18},
    {GgmlType::kQ4_1, "q4_1", 32, 20},
    {GgmlType::kQ5_0, "q5_0", 32, 22},
    {GgmlType::kQ5_1, "q5_1", 32, 24},
    {GgmlType::kQ8_0, "q8_0", 32, 34},
    {GgmlType::kQ8_1, "q8_1", 32, 36},
    {GgmlType::kQ2_K, "q2_K", 256, 84},
    {GgmlType::kQ3_K, "q3_K", 256, 110},
    {GgmlType::kQ4_K, "q4_K", 256, 144},
    {GgmlType::kQ5_K, "q5_K", 256, 176},
    {GgmlType::kQ6_K, "q6_K", 256, 210},
    {GgmlType::kQ8_K, "q8_K", 256, 292},
    {GgmlType::kIQ2_XXS, "iq2_xxs", 256, 66},
    {GgmlType::kIQ2_XS, "iq2_xs", 256, 74},
    {GgmlType::kIQ3_XXS, "iq3_xxs", 256, 98},
    {GgmlType::kIQ1_S, "iq1_s", 256, 50},
    {GgmlType::kIQ4_NL, "iq4_nl", 32, 18},
    {GgmlType::kIQ3_S, "iq3_s", 256, 110},
    {GgmlType::kIQ2_S, "iq2_s", 256, 82},
    {GgmlType::kIQ4_XS, "iq4_xs", 256, 136},
    {GgmlType::kI8, "i8", 1, 1},
    {GgmlType::kI16, "i16", 1, 2},
    {GgmlType::kI32, "i32", 1, 4},
    {GgmlType::kI64, "i64", 1, 8},
    {GgmlType::kF64, "f64", 1, 8},
    {GgmlType::kIQ1_M, "iq1_m", 256, 56},
    {GgmlType::kBF16, "bf16", 1, 2},
    {GgmlType::kTQ1_0, "tq1_0", 256, 54},
    {GgmlType::kTQ2_0, "tq2_0", 256, 66},
    {GgmlType::kMXFP4, "mxfp4", 32, 17},
}};

}  // namespace

const GgmlTypeTraits* FindGgmlType(uint32_t id) {
  for (const GgmlTypeTraits& t : kTypes) {
    if (static_cast<uint32_t>(t.type) == id) return &t;
  }
  return nullptr;
}

const GgmlTypeTraits& GgmlTraits(GgmlType type) {
  const GgmlTypeTraits* t = FindGgmlType(static_cast<uint32_t>(type));
  if (t == nullptr) throw ConfigError("ggml type id " + std::to_string(static_cast<uint32_t>(type)) + " is unknown");
  return *t;
}

int64_t GgmlRowBytes(GgmlType type, int64_t n) {
  const GgmlTypeTraits& t = GgmlTraits(type);
  if (n < 0 || n % t.block_size != 0) return -1;
  const int64_t blocks = n / t.block_size;
  if (blocks > std::numeric_limits<int64_t>::max() / t.type_size) return -1;
  return blocks * t.type_size;
}

}  // namespace posenc
