// RoPE rotation kernels: pointers, sizes and strides only (no validation, no exceptions, no I/O).
// The public wrappers in rope/apply.h validate and then call RopeKernel. This is the one boundary a SIMD
// implementation replaces; RopeKernelScalar stays as the reference every fast path is tested against.
#pragma once

#include <cstdint>

#include "posenc/core/dtype.h"
#include "posenc/rope/layout.h"

namespace posenc::kernels {

/// One in-place rotation call. Preconditions (checked by the caller): 2*half <= head_dim, every
/// rows[t] in [0, n_rows), strides large enough that heads and tokens do not overlap.
struct RopeKernelArgs {
  void* data;             // [n_tokens, n_heads, head_dim] elements of `dtype`, innermost contiguous
  DType dtype;
  int64_t n_tokens;
  int64_t n_heads;
  int64_t token_stride;   // elements
  int64_t head_stride;    // elements
  const int64_t* rows;    // [n_tokens]: table row of each token
  const float* cos;       // [n_rows, half]
  const float* sin;       // [n_rows, half]
  int64_t half;           // rotary_dim / 2; channels >= 2*half are not touched
  RopeLayout layout;
  RopeDirection direction;
};

/// Scalar reference: widens each element to float32, rotates, rounds back once (nearest even).
void RopeKernelScalar(const RopeKernelArgs& args);

/// The kernel the library calls (today: RopeKernelScalar).
void RopeKernel(const RopeKernelArgs& args);

}  // namespace posenc::kernels
