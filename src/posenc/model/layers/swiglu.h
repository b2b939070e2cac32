// SwiGLU activation of the Llama feed-forward block, forward beside backward, on the fused output of the gate
// and up projections (w1 and w3 stored one after the other: one product computes both).
//
// Legend (row-major, innermost last):
//   n       rows: tokens, batch * ctx flattened
//   hidden  the feed-forward width (hidden_dim, HF intermediate_size)
// gate_up [n, 2 * hidden]: row r is [gate_r (w1 x_r) | up_r (w3 x_r)].
// Math:    h = silu(gate) * up, silu(a) = a * sigmoid(a) = a / (1 + e^-a).
//
// Gradients accumulate (+=); the caller zeroes them first. Types: float (the Highway row kernels of
// posenc/kernels/train_kernels.h: sigmoid from exp(-|a|) without overflow, within 3 ulp) and float64 (std::exp).
// Threads: rows in one piece per thread (layers/parallel.h; element-wise: results do not depend on the thread
// count).
#pragma once

#include <cstdint>

namespace posenc {

/// h = silu(gate) * up.
/// Shapes:  gate_up [n, 2 * hidden]; h [n, hidden] (overwritten; must not overlap gate_up).
/// Errors:  ShapeError if n < 0, hidden < 1, or a pointer is null while n > 0.
/// Source:  Shazeer 2020, "GLU Variants Improve Transformer" (SwiGLU); llama2.c run.c `forward`; HF `LlamaMLP`.
template <typename T>
void SwiGluForward(const T* gate_up, int64_t n, int64_t hidden, T* h);

/// Gradients of SwiGluForward, with s = sigmoid(gate):
///   dgate += dh * up * s * (1 + gate * (1 - s)),   dup += dh * gate * s.
/// Shapes:  dh [n, hidden]; gate_up [n, 2 * hidden] (the forward's input); dgate_up [n, 2 * hidden] +=, laid
///          out as gate_up. Errors: as SwiGluForward.
template <typename T>
void SwiGluBackward(const T* dh, const T* gate_up, int64_t n, int64_t hidden, T* dgate_up);

}  // namespace posenc
