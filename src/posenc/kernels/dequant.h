// Dequantization of ggml tensor rows to float32, exactly as ggml defines it (scalar reference code).
#pragma once

#include <cstdint>

#include "posenc/kernels/ggml_types.h"

namespace posenc {

/// True for the types DequantizeRow handles: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K,
/// Q5_K, Q6_K, IQ4_NL.
bool CanDequantize(GgmlType type);

/// Converts n consecutive values stored as `type` to float32.
///
/// Shapes:  src holds n / block_size blocks of the type's layout (GgmlRowBytes(type, n) bytes, any alignment);
///          dst receives n floats. src and dst must not overlap.
/// Layout:  ggml-common.h block structs, little-endian; fp16 scales (d, dmin, m) are IEEE binary16.
/// Errors:  ShapeError if n < 0 or n is not a multiple of the type's block size; ConfigError naming the type if
///          CanDequantize(type) is false.
/// Source:  ggml-quants.c `dequantize_row_q4_0` ... `dequantize_row_q6_K`, `dequantize_row_iq4_nl` (table
///          `kvalues_iq4nl`), ggml.c `ggml_fp16_to_fp32_row` / `ggml_bf16_to_fp32_row`. Same float32 operations in
///          the same order (e.g. Q4_K: (d*sc)*q - dmin*m; Q6_K: (d*sc)*q), no fused multiply-add, so results are
///          bit-identical to ggml's scalar reference path.
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

/// The 16 IQ4_NL code values (ggml-common.h `kvalues_iq4nl`): a 4-bit code c decodes to d * kIq4nlValues[c].
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

}  // namespace posenc
