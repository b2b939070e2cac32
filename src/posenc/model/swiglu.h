// SwiGLU activation of the llama feed-forward block.
#pragma once

#include <cstdint>

namespace posenc {

/// hb[i] <- silu(hb[i]) * hb2[i] = hb[i] / (1 + e^-hb[i]) * hb2[i], for i < n (in place on hb).
/// Shapes: hb, hb2 [n] (any layout: elementwise). e^x is ExpF32 (within 2 ulp; exp_kernel.h).
/// Errors: none (n <= 0 does nothing). Source: Shazeer 2020 (GLU variants); llama2.c run.c `forward`.
void SwiGluInPlace(float* hb, const float* hb2, int64_t n);

}  // namespace posenc
