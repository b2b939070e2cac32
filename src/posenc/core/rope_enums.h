// The four RoPE enums shared by the public API (rope/), the kernels (kernels/) and the attention code: which
// channels pair, which way a call rotates, how an angle is formed, and whether attention_factor is folded in.
// They live in core/ so that kernels depend on core/ only.
#pragma once

namespace posenc {

/// Which channels form a rotation pair inside [0, rotary_dim).
///   kInterleaved: pairs (2i, 2i+1): GPT-J, Meta's original Llama, llama2.c, DeepSeek's checkpoints.
///   kHalfSplit:   pairs (i, i + rotary_dim/2): GPT-NeoX, Hugging Face `rotate_half`.
/// Pair i rotates by angle pos * inv_freq[i] in both.
enum class RopeLayout { kHalfSplit, kInterleaved };

/// What the call does with each pair (a, b), with c = cos row entry and s = sin row entry:
///   kForward:  (a c - b s, a s + b c)           the rotation R (times attention_factor if folded).
///   kBackward: (a c + b s, -a s + b c)          R^T: the gradient dL/dx from dL/dy (exact for any scale).
///   kInverse:  R^T (a, b) / (c^2 + s^2)         undoes kForward, also when attention_factor is folded
///                                               (for KV-cache re-rotation); equals kBackward when c^2+s^2=1.
enum class RopeDirection { kForward, kBackward, kInverse };

/// How the angle pos * inv_freq is formed before cos/sin.
///
/// kHf:    angle = fl32(inv_freq * fl32(pos)), then cos/sin of that float32 angle, correctly rounded
///         (within 1 ulp of the float64 cos of the float32 angle), times fl32(attention_factor) in float32:
///         HF's `LlamaRotaryEmbedding.forward`. Its error against the true angle grows with the position:
///         the float32 angle carries up to ulp(angle)/2 (0.004 rad at angle 1.3e5), and positions >= 2^24
///         are not exact in float32. Tests: within 2 ulp of HF's own float32 cos/sin.
/// kExact: angle = inv_freq (the float32 value) * pos formed exactly (double for |pos| < 2^29, long double
///         above; a 24-bit by 29-bit product fits in 53 bits), cos/sin in double (glibc, < 1 ulp), times
///         attention_factor in double, rounded once to float32. Result: within 1 ulp of the true
///         cos(inv_freq * pos) * attention_factor for every |pos| < 2^29, and within 2 ulp up to 2^40.
///         It differs from HF's float64 run only by HF's float64 inv_freq: |d cos| <= pos * |inv_freq_f32 -
///         inv_freq_f64| * attention_factor (+ 1 ulp), the bound the tests use.
enum class RopePrecision { kExact, kHf };

/// Whether attention_factor is multiplied into cos and sin (as HF returns them) or left out (the caller
/// applies it elsewhere; the tables are then plain cos/sin).
enum class AttentionFold { kFolded, kApart };

}  // namespace posenc
