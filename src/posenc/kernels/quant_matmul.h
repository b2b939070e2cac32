// Activations times a ggml block-quantized weight matrix, Y = X W^T, with the result of dequantizing W to
// float32 and multiplying in float32. Pointer + ggml type + sizes in (no file objects); validation, the choice of
// path and threading here, the per-target kernels in kernels/quant_dot.h.
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/kernels/ggml_types.h"

namespace posenc {

/// How QuantMatmul forms the product.
enum class QuantMatmulPath {
  kAuto,    // ChooseQuantMatmulPath(type, n)
  kPanel,   // decode panels of weight rows to float32 (an L2-sized buffer per thread), OpenBLAS sgemm on each
            // panel; F32 weights go to sgemm directly, panel by panel, without a copy
  kDirect,  // Highway dot products of the activation rows with the rows decoded in registers (no float copy)
};

/// "auto", "panel" or "direct".
std::string_view QuantMatmulPathName(QuantMatmulPath path);

/// Settings of one QuantMatmul call.
struct QuantMatmulOptions {
  int threads = 0;                            // OpenMP threads, 0 = OpenMP's default (all cores / OMP_NUM_THREADS)
  QuantMatmulPath path = QuantMatmulPath::kAuto;
  int64_t panel_rows = 0;                     // weight rows per panel of kPanel; 0 = QuantMatmulPanelRows(in)
};

/// Weight rows per panel QuantMatmul's kPanel path uses by default for rows of `in` values: a panel of about
/// 1 MiB of float32 (n_panel * in * 4 bytes), between 16 and 4096 rows. Errors: none.
int64_t QuantMatmulPanelRows(int64_t in);

/// The path QuantMatmulPath::kAuto takes for n activation rows of a `type` matrix: kDirect while n is small
/// enough that decoding the weights once per four activation rows beats sgemm on decoded panels (measured, see
/// BENCHMARKS.md, "Quantized matrix products"): n <= 16 for F16, BF16, Q8_0, Q4_0, Q5_0, IQ4_NL, Q2_K; n <= 8
/// for F32, Q4_1, Q5_1, Q3_K, Q4_K, Q6_K; n <= 4 for Q5_K (and unsupported types, which QuantMatmul rejects); else
/// kPanel. So decode (n = 1) always takes kDirect and prefill (n in the hundreds) kPanel. Never depends on the
/// thread count, so results do not either. Errors: none.
QuantMatmulPath ChooseQuantMatmulPath(GgmlType type, int64_t n);

/// Y = X W^T for float32 activations X and a weight matrix W stored in a ggml type.
///
/// Shapes:    w [out, in] in `type`, row-major: row o (output feature o) is GgmlRowBytes(type, in) bytes at
///            w + o * GgmlRowBytes(type, in), blocks as ggml-common.h lays them out (any alignment; a GGUF tensor
///            with ne = [in, out]); x [n, in] float32 row-major; y [n, out] float32 row-major, overwritten.
///            y must not overlap w or x. n = 0 or out = 0 does nothing; in = 0 writes zeros.
/// Layout:    the same result bits for every thread count (each output's sum has one order, whichever thread
///            forms it); kAuto picks the path from (type, n) only. On kDirect row i of Y also does not depend on
///            n or the other rows of X; on kPanel sgemm's blocking may differ with n.
/// Errors:    ConfigError naming the type if it is not one DequantizeRow decodes (F32, F16, BF16, Q4_0, Q4_1,
///            Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL), or naming `in` and the block size if in is
///            not a multiple of the type's block size; ConfigError from ResolveThreads for threads outside
///            [0, 1024] or panel_rows < 0; ShapeError if n, out or in is negative, a pointer is null for a non-empty operand, or a
///            byte count overflows int64.
/// Precision: every weight is DequantizeRow's float32 value (bit for bit); each output is a float32 sum of `in`
///            products, within gamma_in * sum_k |x_k w_k| of the exact product of X and the dequantized W
///            (gamma_m = m u / (1 - m u), u = 2^-24; Higham, Accuracy and Stability, Sec. 3.1, any summation
///            order), which the tests enforce against a float64 product.
/// Threads:   OpenMP over panels (kPanel) or blocks of rows (kDirect), at most one thread per 2^20 multiply-adds
///            (n * out * in), so small products stay on the calling thread; OpenBLAS is held at one thread for the
///            duration of the call (restored after), so a caller's own OpenMP region may call this with
///            threads = 1.
/// Source:    the product ggml computes with `ggml_mul_mat` (weights ne = [in, out], activations [n, in]), without
///            quantizing the activations (ggml's `vec_dot_type` Q8 blocks): exact dequantization as ggml-quants.c
///            `dequantize_row_*` defines it, then float32 arithmetic.
void QuantMatmul(GgmlType type, const void* w, int64_t out, int64_t in, const float* x, int64_t n, float* y,
                 const QuantMatmulOptions& options = {});

/// Bytes of scratch memory QuantMatmul allocates for one call with the default panel height (besides W, X and
/// Y): the per-thread panel buffers of kPanel (one per thread QuantMatmul starts, at most one per panel, each
/// min(QuantMatmulPanelRows(in), out) x in floats; none for F32 weights), nothing for kDirect.
/// Shapes:  n, out, in as in QuantMatmul; threads as QuantMatmulOptions::threads; kAuto is resolved with n.
/// Errors:  ConfigError from ResolveThreads for threads outside [0, 1024].
int64_t QuantMatmulScratchBytes(GgmlType type, int64_t n, int64_t out, int64_t in, int threads,
                                QuantMatmulPath path);

/// Dequantizes a whole weight matrix to float32 once (the "decode at load" alternative to QuantMatmul: 4 bytes
/// per weight, then GemmNT).
///
/// Shapes:    w [out, in] in `type` as in QuantMatmul; dst [out, in] float32 row-major, overwritten.
/// Errors:    as QuantMatmul (type, in, threads, negative sizes, null pointers, overflow).
/// Precision: bit for bit DequantizeRow's values.
void DequantizeMatrix(GgmlType type, const void* w, int64_t out, int64_t in, float* dst, int threads = 0);

}  // namespace posenc
