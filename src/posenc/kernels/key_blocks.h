// Key-block packing for the attention kernels (posenc/kernels/attention_kernels.h, AttendTile).
// Internal to posenc (not installed): no validation here; the callers in attention/attention.cc check every
// shape first.
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

/// The inverse direction, accumulating (training: key and value gradients computed in key blocks):
/// dst[j, d] += src(block j / 8, channel d, lane j % 8) for j < n, d < head_dim.
/// Shapes: src [NumKeyBlocks(n), head_dim, 8] (one kv head); dst [n, head_dim] with token stride `stride`.
void UnpackKeyBlocksAdd(const float* src, int64_t n, int64_t head_dim, float* dst, int64_t stride);

}  // namespace posenc::kernels
