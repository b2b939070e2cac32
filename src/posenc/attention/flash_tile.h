// The steps of one tiled-attention work item (a block of query rows of one KV head), shared by
// FlashCausalAttention (flash_attention.h) and RingCausalAttention (ring_attention.h): load the queries, add runs
// of keys to an online-softmax state, divide out. Internal to posenc/attention: no validation here (the callers
// check every shape first), no exceptions beyond those of the GEMM wrappers, no allocation.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/rope/cos_sin.h"
#include "posenc/rope/layout.h"

namespace posenc {

/// Loads the queries of one work item into head-major rows and multiplies them by the softmax scale:
/// dst row hh * nb + ii = scale * R(rows[ii]) q(query ii, head hh), hh in [0, kv_mul), ii in [0, nb).
///
/// Shapes:  src: query ii, head hh at src + ii * src_stride + hh * head_dim (the item's first query, its KV
///          group's first head); dst [kv_mul * nb, head_dim], contiguous; rows [nb] (cos/sin rows of `table`).
/// Layout:  table.cos == nullptr: no rotation (q already rotated); otherwise channels [0, 2 * table.half) rotated
///          in `layout` by ApplyRope (out of place: the same bits as the library's RoPE), the rest copied.
/// Precision: one rounding for the scale product (after the rotation's own).
void FlashLoadQueries(const float* src, int64_t src_stride, int64_t kv_mul, int64_t nb, int64_t head_dim,
                      const CosSinView& table, std::span<const int64_t> rows, RopeLayout layout, float scale,
                      float* dst);

/// Online-softmax state of `rows` query rows (FlashAttention, Dao et al. 2022, Algorithm 1: O, l, m) and the
/// work buffers of one key tile. The caller owns every buffer.
struct FlashRows {
  int64_t rows = 0;      // query rows (kv_mul heads x query positions, head-major)
  int64_t head_dim = 0;
  int64_t k_block = 0;   // keys per score tile (>= 1)
  const float* q = nullptr;  // [rows, head_dim]: rotated, scaled queries (FlashLoadQueries)
  float* o = nullptr;        // [rows, head_dim]: unnormalised output accumulator
  float* m = nullptr;        // [rows]: running maximum score (-inf before any key)
  float* l = nullptr;        // [rows]: running sum of exp(score - m)
  float* s = nullptr;        // [rows, k_block]: score tile (work)
  float* corr = nullptr;     // [rows]: rescale factor of the current tile (work)
  int64_t* valid = nullptr;  // [rows]: unmasked keys of the current tile per row (work)
};

/// Sets o = 0, m = -inf, l = 0: no key seen yet.
void FlashResetRows(const FlashRows& st);

/// Adds one run of consecutive keys to the state: row r sees keys [0, n_visible[r]) of the run (a prefix: the
/// causal mask of a contiguous run of key positions). Per tile of k_block keys up to max_r n_visible[r]:
/// S = Q K^T (GemmNT), FlashSoftmaxTile (keys past a row's prefix masked), O *= corr (FlashScaleRows),
/// O += P V (GemmNN). A row with no visible key in a tile is left exactly as it was (corr = exp(0) = 1).
///
/// Shapes:  key j of the run at k + j * k_stride, value j at v + j * v_stride (head_dim floats each, one KV
///          head), j < max_r n_visible[r]; n_visible [rows], each >= 0.
/// Precision: float32; see FlashCausalAttention for the bound (each tile adds one rescale of O and l).
void FlashAccumulate(const FlashRows& st, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                     const int64_t* n_visible);

/// Writes out = O / l for the item's rows: row hh * nb + ii goes to out + ii * out_stride + hh * head_dim.
/// Every row must have seen at least one key (l >= 1).
void FlashFinishRows(const FlashRows& st, int64_t kv_mul, int64_t nb, float* out, int64_t out_stride);

}  // namespace posenc
