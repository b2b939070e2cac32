// Highway kernels over rows of ggml block-quantized weights: decode to float32 (bit for bit DequantizeRow's
// values) and dot products of float32 activations with the decoded rows. Pointers and sizes only (no
// validation, no exceptions): kernels/quant_matmul.h validates and threads. The scalar twins
// (quant_dot_scalar.cc) are the references the Highway paths are tested against on every target.
//
// Shared argument conventions:
//   type       a ggml type for which CanDequantize(type) is true (kernels/dequant.h);
//   w          rows of the weight matrix [rows, in], row r at w + r * row_bytes, row_bytes = GgmlRowBytes(type,
//              in) (blocks as ggml-common.h lays them out, little-endian, any alignment);
//   in         values per row, a multiple of the type's block size (32 for Q4_0..Q8_0 and IQ4_NL, 256 for the
//              K-quants, 1 for F32/F16/BF16).
#pragma once

#include <cstdint>

#include "posenc/kernels/ggml_types.h"

namespace posenc::kernels {

/// Decodes `rows` weight rows to float32: dst[r * ld_dst + k] = value k of row r.
///
/// Shapes:    w [rows, in] in `type` (see the file comment); dst [rows, ld_dst] float32, ld_dst >= in. dst must not
///            overlap w. rows <= 0 or in <= 0 does nothing.
/// Precision: every value is computed with DequantizeRow's float32 operations in its order (e.g. Q4_K:
///            (d * sc) * q - dmin * m as a product, a product and a difference, never fused), so the result equals
///            DequantizeRow bit for bit on every target, NaN and infinity included (F16's NaN becomes the quiet
///            NaN F16ToF32 returns).
/// Source:    ggml-quants.c `dequantize_row_*`; ggml.c `ggml_fp16_to_fp32_row`, `ggml_bf16_to_fp32_row`.
void DequantizeRows(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, float* dst,
                    int64_t ld_dst);

/// Scalar twin of DequantizeRows: DequantizeRow on each row.
void DequantizeRowsScalar(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, float* dst,
                          int64_t ld_dst);

/// y[i * ldy + r] = sum_k x[i * in + k] * w_r[k] for i < n, r < rows, where w_r[k] is DequantizeRow's float32
/// value k of row r, decoded block by block in registers (no float32 copy of the row is stored).
///
/// Shapes:    w [rows, in] in `type`; x [n, in] float32, contiguous rows; y [n, ldy] float32, ldy >= rows, only
///            columns [0, rows) written (overwritten, not accumulated). y must not overlap w or x.
/// Layout:    four rows of x share one decode of each weight row; the sum of one output is formed in the same
///            order whatever the other rows are, so splitting `rows` or `n` between calls changes no bit.
/// Precision: the products are float32 (fused multiply-add on AVX2/AVX3, product then sum elsewhere), summed in
///            lanes, two accumulators per row, then across lanes: a float32 summation of `in` terms, within
///            gamma_in * sum_k |x_k w_k| (gamma_m = m u / (1 - m u), u = 2^-24) of the exact dot product of the
///            dequantized row (Higham, Accuracy and Stability, Sec. 3.1, any summation order).
/// Source:    the product ggml's `ggml_vec_dot_*` computes, but against the float32 dequantized weights: x is not
///            quantized to Q8 blocks as ggml does.
void QuantDotRows(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, const float* x,
                  int64_t n, float* y, int64_t ldy);

/// Scalar twin of QuantDotRows: DequantizeRow of each row into a buffer, then one float32 sum per output in index
/// order (product rounded, then added). Within the same gamma_in bound.
void QuantDotRowsScalar(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, const float* x,
                        int64_t n, float* y, int64_t ldy);

/// Name of the Highway target QuantDotRows and DequantizeRows dispatch to ("AVX2", ...).
const char* QuantKernelTargetName();

}  // namespace posenc::kernels
