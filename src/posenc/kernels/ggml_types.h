// ggml tensor element types: ids as ggml's `enum ggml_type` numbers them (the values stored in GGUF files),
// names, and block layouts (values per block, bytes per block).
#pragma once

#include <cstdint>
#include <string_view>

namespace posenc {

/// ggml's tensor types with their enum numbers (ggml.h `enum ggml_type`). Ids 4, 5, 31-33 and 36-38 were
/// removed from ggml and are not valid in GGUF files.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

/// Layout of one ggml type: a row of n values is n / block_size blocks of type_size bytes each.
struct GgmlTypeTraits {
  GgmlType type;
  std::string_view name;  // ggml's type name: "f32", "q4_K", "iq4_nl", ...
  int64_t block_size;     // values per block (1 for plain types, 32 for Q4_0..Q8_0 and IQ4_NL, 256 for K-quants)
  int64_t type_size;      // bytes per block
};

/// The traits of a type id read from a file, or nullptr if the id is not a ggml type (unknown or removed).
/// Source: ggml.c `type_traits` (blck_size, type_size) and ggml-common.h block structs.
const GgmlTypeTraits* FindGgmlType(uint32_t id);

/// The traits of a known type.
const GgmlTypeTraits& GgmlTraits(GgmlType type);

/// ggml's name of the type ("q8_0").
inline std::string_view GgmlTypeName(GgmlType type) { return GgmlTraits(type).name; }

/// Bytes of a row of n values of this type, or -1 if n < 0 or n is not a whole number of blocks.
/// Overflow-safe: -1 also when the byte count does not fit in int64.
int64_t GgmlRowBytes(GgmlType type, int64_t n);

/// Scale s (0..15) of a Q3_K block, a signed 6-bit value, from the block's 12 packed scale bytes: low 4 bits from
/// byte s (s < 8, low nibble) or byte s - 8 (high nibble), high 2 bits from byte 8 + s % 4 at bits 2 (s / 4);
/// minus 32. Source: ggml-quants.c `dequantize_row_q3_K` (its kmask unpacking).
inline int Q3KScale(const uint8_t* packed, int s) {
  const int low = s < 8 ? (packed[s] & 0xF) : (packed[s - 8] >> 4);
  const int high = (packed[8 + s % 4] >> (2 * (s / 4))) & 3;
  return (low | (high << 4)) - 32;
}

/// 6-bit scale *sc and min *m of sub-block j (0..7) of a Q4_K / Q5_K block from its 12 packed scale bytes q.
/// Source: ggml-quants.c `get_scale_min_k4`.
inline void ScaleMinK4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

}  // namespace posenc
