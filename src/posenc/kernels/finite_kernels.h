// The NaN/infinity scan behind every cheap finiteness check (checkpoint weights at load, activations and
// logits of a forward pass, sampler logits). Pointers and sizes only; FirstNonFinite (finite_kernels.cc,
// Highway) is tested against FirstNonFiniteScalar (finite_kernels_scalar.cc) on every target.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// Index of the first element of x[0, n) that is NaN, +inf or -inf; -1 if every element is finite (or
/// n <= 0). Reads x[0, n) once; x need not be aligned.
int64_t FirstNonFinite(const float* x, int64_t n);

/// Scalar reference of FirstNonFinite (std::isfinite on each element in order).
int64_t FirstNonFiniteScalar(const float* x, int64_t n);

/// Name of the Highway target FirstNonFinite dispatches to ("AVX2", ...).
const char* FiniteKernelTargetName();

}  // namespace posenc::kernels
