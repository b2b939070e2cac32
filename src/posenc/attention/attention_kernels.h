// Inner loops of causal attention: one query row (all query heads of one KV group) against its keys.
// Internal to posenc/attention: no validation here; the callers in attention.cc check every shape first.
//
// Keys and values are packed in "key blocks" of 8 keys: [n_blocks, head_dim, 8], entry (block b, channel d,
// lane l) = channel d of key 8b + l, zero past the last key. One vector load fetches one channel of 8
// consecutive keys, and a whole block sits at one base pointer with constant offsets.
#pragma once

#include <cstdint>

namespace posenc::kernels {

inline constexpr int64_t kKeyBlock = 8;  // keys per block = float32 lanes of one AVX register

/// Blocks covering n keys.
inline int64_t NumKeyBlocks(int64_t n) { return (n + kKeyBlock - 1) / kKeyBlock; }

/// Packs every kv head of n tokens into key blocks.
/// Shapes: src [n, n_kv_heads, head_dim] with token stride `stride`; dst [n_kv_heads, NumKeyBlocks(n),
///         head_dim, 8], lanes past n zeroed.
void PackKeyBlocks(const float* src, int64_t stride, int64_t n, int64_t n_kv_heads, int64_t head_dim, float* dst);

/// One attention row for the kv_mul query heads that share a KV head, keys [0, n).
///
/// Shapes:  q [kv_mul, head_dim] contiguous (already rotated); kb, vb: that KV head's keys and values in key
///          blocks [>= NumKeyBlocks(n), head_dim, 8]; scores: scratch of kv_mul * NumKeyBlocks(n) * 8 floats;
///          out [kv_mul, head_dim] contiguous, overwritten.
/// Math:    s_j = (q . k_j) * scale; w = softmax(s) (max subtracted, exp within 2 ulp); out = sum_j w_j v_j,
///          computed as sum_j e_j v_j / sum_j e_j.
/// Preconditions: n >= 1, head_dim >= 1.
/// Vectorised 8 lanes wide with GCC vector extensions; built for AVX2 and for the baseline, picked at run
/// time (target_clones). Summation order differs from a sequential loop (lane partial sums, tree dot).
void AttendRow(const float* q, int64_t kv_mul, const float* kb, const float* vb, int64_t n, int64_t head_dim,
               float scale, float* scores, float* out);

/// AttendRow for a pre-rotation row: kb holds UNrotated keys; key j is rotated by the row's own (cos, sin)
/// before the dot product with q (q already rotated by the row's own angle). cs holds cos and sin in key
/// blocks [NumKeyBlocks(n), 2, half, 8]: (block b, 0, i, lane l) = cos of key 8b+l's angle for pair i, (b, 1,
/// i, l) the sin. Interleaved pairs (2i, 2i+1); channels [2 * half, head_dim) are not rotated.
/// Preconditions: as AttendRow, plus 1 <= half, 2 * half <= head_dim.
void AttendRowRotatingKeys(const float* q, int64_t kv_mul, const float* kb, const float* vb, int64_t n,
                           int64_t head_dim, int64_t half, const float* cs, float scale, float* scores, float* out);

}  // namespace posenc::kernels
