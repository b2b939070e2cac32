// RoPE channel layouts and rotation directions (shared by the public API and the kernels).
#pragma once

#include <cstdint>

namespace posenc {

/// Which channels form a rotation pair inside [0, rotary_dim).
///   kInterleaved: pairs (2i, 2i+1): GPT-J, Meta's original Llama, llama2.c, DeepSeek's checkpoints.
///   kHalfSplit:   pairs (i, i + rotary_dim/2): GPT-NeoX, Hugging Face `rotate_half`.
/// Pair i rotates by angle pos * inv_freq[i] in both.
enum class RopeLayout { kHalfSplit, kInterleaved };

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

/// What the call does with each pair (a, b), with c = cos row entry and s = sin row entry:
///   kForward:  (a c - b s, a s + b c)           the rotation R (times attention_factor if folded).
///   kBackward: (a c + b s, -a s + b c)          R^T: the gradient dL/dx from dL/dy (exact for any scale).
///   kInverse:  R^T (a, b) / (c^2 + s^2)         undoes kForward, also when attention_factor is folded
///                                               (for KV-cache re-rotation); equals kBackward when c^2+s^2=1.
enum class RopeDirection { kForward, kBackward, kInverse };

}  // namespace posenc
