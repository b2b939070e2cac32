// RoPE channel layouts and rotation directions (shared by the public API and the kernels).
#pragma once

namespace posenc {

/// Which channels form a rotation pair inside [0, rotary_dim).
///   kInterleaved: pairs (2i, 2i+1): GPT-J, Meta's original Llama, llama2.c, DeepSeek's checkpoints.
///   kHalfSplit:   pairs (i, i + rotary_dim/2): GPT-NeoX, Hugging Face `rotate_half`.
/// Pair i rotates by angle pos * inv_freq[i] in both.
enum class RopeLayout { kHalfSplit, kInterleaved };

/// "half-split" or "interleaved".
const char* RopeLayoutName(RopeLayout layout);

/// What the call does with each pair (a, b), with c = cos row entry and s = sin row entry:
///   kForward:  (a c - b s, a s + b c)           the rotation R (times attention_factor if folded).
///   kBackward: (a c + b s, -a s + b c)          R^T: the gradient dL/dx from dL/dy (exact for any scale).
///   kInverse:  R^T (a, b) / (c^2 + s^2)         undoes kForward, also when attention_factor is folded
///                                               (for KV-cache re-rotation); equals kBackward when c^2+s^2=1.
enum class RopeDirection { kForward, kBackward, kInverse };

}  // namespace posenc
