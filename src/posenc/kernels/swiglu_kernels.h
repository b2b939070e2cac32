// SwiGLU activation of the llama feed-forward block: hb <- silu(hb) * hb2, elementwise. Pointers and sizes
// only (no validation, no exceptions); the Highway path (swiglu_kernels.cc) is what the model runs and
// SwiGluScalar (swiglu_kernels_scalar.cc) the reference it is tested against, bit for bit.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// hb[i] <- (hb[i] * (1 / (1 + e^-hb[i]))) * hb2[i] for i < n, in place on hb (silu(x) = x sigmoid(x)).
///
/// Shapes:    hb, hb2 [n], elementwise (any layout); hb and hb2 must not overlap. n <= 0 does nothing.
/// Precision: e^x is ExpF32 (kernels/exp_kernel.h: Cephes expf, within 2 ulp, arguments clamped to
///            [-87.34, 88.38]); every other step one float32 operation in the order written, no fused
///            multiply-add, so the Highway path equals SwiGluScalar bit for bit on every target.
///            NaN in hb or hb2 gives NaN; +-inf in hb gives NaN or +-inf (inf * 0 or inf * 1).
/// Source:    Shazeer 2020, "GLU Variants Improve Transformer" (SwiGLU); llama2.c run.c `forward`.
void SwiGlu(float* hb, const float* hb2, int64_t n);

/// Scalar reference of SwiGlu: the same operations one element at a time.
void SwiGluScalar(float* hb, const float* hb2, int64_t n);

/// Name of the Highway target SwiGlu dispatches to ("AVX2", ...).
const char* SwiGluTargetName();

}  // namespace posenc::kernels
