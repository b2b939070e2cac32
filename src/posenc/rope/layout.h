// RoPE channel layouts: their names and the half-split to interleaved reordering (the enums are in core/).
#pragma once

#include <cstdint>

#include "posenc/core/rope_enums.h"

namespace posenc {

/// "half-split" or "interleaved".
const char* RopeLayoutName(RopeLayout layout);

/// Reorders channels from half-split pairs (i, i + r/2) to interleaved pairs (2i, 2i + 1) over the first
/// r = rotary_dim channels of each of n_groups heads; channels past r stay. q . k is the same in either order, so
/// a half-split model's q and k (or its q/k projection rows) work with code that rotates interleaved pairs; this
/// is the reordering llama.cpp's GGUF converter applies to Hugging Face q/k weights.
/// Shapes:  x [n_groups, head_dim, cols], row-major: a channel is a row of `cols` values (cols = 1: activations
///          [.., head_dim]; cols = dim: the rows of a projection matrix [n_heads * head_dim, dim]).
/// Errors:  none; preconditions rotary_dim even, 0 <= rotary_dim <= head_dim, cols >= 1.
void HalfSplitToInterleaved(float* x, int64_t n_groups, int64_t head_dim, int64_t rotary_dim, int64_t cols = 1);

}  // namespace posenc
