// Element-wise and row kernels of the training layers that are not matrix products: SwiGLU forward/backward and
// the softmax rows of the cross-entropy loss. Highway, compiled per target and picked at run time
// (train_kernels.cc); the scalar twins (train_kernels_scalar.cc) are the references the tests hold them to.
// Pointers and sizes only: no validation, no exceptions, no allocation (the layers in posenc/model/layers check
// every shape first).
//
// Exponentials: Highway's contrib Exp (1 ulp on [-FLT_MAX, 104]) in the SIMD path, glibc's expf (< 1 ulp) in the
// twins. Tails (n % Lanes elements) go through one padded local vector, so every element of a row gets the same
// vector formula.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// h[i] = silu(gate[i]) * up[i] = gate[i] * s * up[i], s = sigmoid(gate[i]), for i < n.
/// sigmoid is formed without overflow: t = exp(-|a|) in (0, 1], s = 1 / (1 + t) for a >= 0, t / (1 + t) for a < 0.
/// Shapes: gate, up, h [n]; h must not overlap gate or up. Precision: s within 3 ulp (exp 1 ulp, the sum and the
/// quotient 1 each), h within 5 ulp of gate * s * up.
void SwiGluForwardRow(const float* gate, const float* up, int64_t n, float* h);
void SwiGluForwardRowScalar(const float* gate, const float* up, int64_t n, float* h);

/// Accumulating backward of SwiGluForwardRow, with s as there:
///   dgate[i] += dh[i] * up[i] * (s * (1 + gate[i] * (1 - s))),   dup[i] += dh[i] * (gate[i] * s).
/// Shapes: all [n]; dgate and dup must not overlap the inputs or each other.
void SwiGluBackwardRow(const float* dh, const float* gate, const float* up, int64_t n, float* dgate, float* dup);
void SwiGluBackwardRowScalar(const float* dh, const float* gate, const float* up, int64_t n, float* dgate,
                             float* dup);

/// x[i] = exp(x[i] - lse) * scale for i < n (softmax weights times a scale: the cross-entropy gradient before the
/// one-hot term). Shapes: x [n], in place.
void SoftmaxScaleRow(float* x, int64_t n, float lse, float scale);
void SoftmaxScaleRowScalar(float* x, int64_t n, float lse, float scale);

/// Name of the Highway target these kernels dispatch to ("AVX2", ...).
const char* TrainKernelTargetName();

}  // namespace posenc::kernels
