// RMSNorm of one row, the one kernel every RMSNorm in posenc runs (the decoder block, the training layers, the
// position-blindness demo). Pointers and sizes only (no validation, no exceptions); header-only so each caller's
// loop over rows inlines it.
#pragma once

#include <cmath>
#include <cstdint>

namespace posenc::kernels {

/// y[c] = w[c] * (x[c] * rstd) for c < dim with rstd = 1 / sqrt(mean_c(x[c]^2) + eps); returns rstd.
///
/// Shapes:    x, w, y [dim]; y may equal x (each x[c] is read before y[c] is written), must not overlap w.
/// Units:     eps is added to the mean square (GGUF layer_norm_rms_epsilon, HF rms_norm_eps).
/// Precision: the sum of squares accumulates in T (float32 as transformers' LlamaRMSNorm and llama2.c; the
///            compiler may split it into SIMD lanes, #pragma omp simd reduction), the mean is one division by
///            dim, rstd = 1 / sqrt(ms + eps) rounded once, then each output two multiplications in the order
///            written.
/// Source:    Zhang & Sennrich 2019 (RMSNorm); llama2.c run.c `rmsnorm`; HF `LlamaRMSNorm.forward`.
template <typename T>
inline T RmsNormRow(const T* x, const T* w, int64_t dim, T eps, T* y) {
  T ss = 0;
#pragma omp simd reduction(+ : ss)
  for (int64_t c = 0; c < dim; ++c) ss += x[c] * x[c];
  const T rstd = T{1} / std::sqrt(ss / static_cast<T>(dim) + eps);
#pragma omp simd
  for (int64_t c = 0; c < dim; ++c) y[c] = w[c] * (x[c] * rstd);
  return rstd;
}

/// RmsNormRow over n rows of width dim: x, y [n, dim] (y may equal x), w [dim]; rows in order, one thread.
template <typename T>
inline void RmsNormRows(const T* x, const T* w, int64_t n, int64_t dim, T eps, T* y) {
  for (int64_t t = 0; t < n; ++t) RmsNormRow(x + t * dim, w, dim, eps, y + t * dim);
}

}  // namespace posenc::kernels
