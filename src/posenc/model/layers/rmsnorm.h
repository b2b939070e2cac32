// RMSNorm, forward beside backward (llm.c's layernorm_forward / layernorm_backward, without the mean and bias).
//
// Legend (row-major, innermost last):
//   n    rows: tokens, batch * ctx flattened
//   dim  channels of a row (the model width)
// Math per row x:  rstd = 1 / sqrt(mean_c(x_c^2) + eps),  y_c = w_c * (x_c * rstd).
//
// Gradients accumulate (+=) into dx and dw; the caller zeroes them first.
// Types: float (the training path) and float64 (gradient checks). Threads: rows in one piece per thread (layers/parallel.h);
// dw summed in float64 over fixed row blocks (layers::ReduceRowBlocks), so results do not depend on the
// thread count.
#pragma once

#include <cstdint>

namespace posenc {

/// y = RMSNorm(x) * w, saving rstd for the backward.
///
/// Shapes:  x [n, dim]; w [dim]; y [n, dim] (overwritten; may not overlap x); rstd [n] (overwritten).
/// Units:   eps is added to the mean square (the file's norm_rms_eps / rms_norm_eps; llama2.c: 1e-5).
/// Errors:  ShapeError if n < 0 or dim < 1, or a pointer is null while n > 0; ConfigError if eps is not finite
///          or < 0.
/// Precision: the mean square is accumulated in the element type (float32 as HF's Llama and llama2.c), rstd
///          = 1 / sqrt(ms + eps) rounded once.
/// Source:  Zhang & Sennrich 2019 (RMSNorm); HF `LlamaRMSNorm`; llama2.c run.c `rmsnorm`.
template <typename T>
void RmsNormForward(const T* x, const T* w, int64_t n, int64_t dim, double eps, T* y, T* rstd);

/// Gradients of RmsNormForward, with xhat = x * rstd and g = dy * w:
///   dx += rstd * (g - xhat * mean_c(g_c * xhat_c)),   dw += sum over rows of dy * xhat.
///
/// Shapes:  dy, x [n, dim]; w [dim]; rstd [n] (the forward's); dx [n, dim] +=; dw [dim] +=.
/// Errors:  as RmsNormForward (ShapeError for sizes and null pointers).
/// Precision: mean_c(g xhat) in float64 per row; dw summed in float64 and rounded once.
/// Source:  derivative of the forward (llm.c `layernorm_backward` without the mean term).
template <typename T>
void RmsNormBackward(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int64_t dim, T* dx, T* dw);

}  // namespace posenc
