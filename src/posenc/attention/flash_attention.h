// Tiled causal attention with RoPE fused into the loads (flash-style, online softmax): never forms the
// n_q x n_k score matrix. Same contract and numbers (to float32 rounding) as CausalAttention (attention.h).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/layout.h"

namespace posenc {

/// Which inputs FlashCausalAttention rotates.
enum class FlashRopeTarget {
  kNone,              // q and k already carry their rotation (as CausalAttention takes them)
  kQueriesAndKeys,    // rotate q (query i by row q_pos0 + i) and k (key j by row j)
  kQueriesOnly,       // rotate q; k is a cache of already-rotated keys (decode, chunked prefill)
};

/// RoPE for FlashCausalAttention: a cos/sin table whose row p holds position p (a RopeCache view, or
/// ComputeCosSin over positions 0..n-1), in `layout`; channels [0, 2 * table.half) of each head are rotated,
/// the rest (partial rotary) pass through. Never applied to v.
struct FlashRope {
  FlashRopeTarget target = FlashRopeTarget::kNone;
  CosSinView table;                           // [n_rows, half]; n_rows >= n_k when target != kNone
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// Tile sizes. An item's matrices have kv_mul * q_block rows (the query heads of one kv head are stacked, so
/// GQA enlarges the GEMMs without enlarging the masked diagonal block, whose wasted work is ~q_block / L of
/// the total). Defaults from a sweep (Zen 3, OpenBLAS 0.3.21, one thread, thread CPU time;
/// bench/results/attention_tiling_sweep.txt): 64-512 rows x 128-512 keys all landed within the sweep's noise
/// (34-51 GFLOP/s on a loaded machine, sgemm 70); 256 rows x 256 keys keeps an item's q, scores and
/// accumulator (256 KiB + 2 x 128 KiB at head_dim 128) near the 512 KiB L2.
struct FlashTiling {
  int64_t q_block = 0;    // query positions per work item; 0: automatic, clamp(256 / kv_mul, 16, 128)
  int64_t k_block = 256;  // keys per score tile
};

/// Per-thread buffers of one work item; sizes in floats, all O(tile), independent of n_q and n_k.
struct FlashThreadScratch {
  std::vector<float> q;        // [kv_mul * q_block, head_dim]: rotated, scaled queries, head-major rows
  std::vector<float> s;        // [kv_mul * q_block, k_block]: scores, then unnormalised weights
  std::vector<float> o;        // [kv_mul * q_block, head_dim]: output accumulator
  std::vector<float> m, l, corr;  // [kv_mul * q_block]: running max, running sum, rescale factor
  std::vector<int64_t> valid;  // [kv_mul * q_block]: unmasked keys of the current tile per row
  std::vector<int64_t> rows;   // [q_block + kv_mul * q_block]: the item's table rows, then each row's visible keys
};

/// Reusable buffers of FlashCausalAttention (they grow to the largest call and are kept).
struct FlashScratch {
  std::vector<float> k_rot;         // [n_kv_heads, n_k, head_dim]: rotated keys (kQueriesAndKeys only)
  std::vector<int64_t> k_rows;      // [n_k]: 0, 1, ..., n_k - 1
  std::vector<FlashThreadScratch> threads;  // one per OpenMP thread of the call
  /// Bytes held now (capacities), for reporting memory use next to n_q * n_k * 4.
  int64_t Bytes() const;
};

/// Work up to which FlashCausalAttention runs on the calling thread, in flops (4 * head_dim per (query head,
/// key) pair): 2^25 flops is ~0.5 ms on one core of the machine measured, ~50x an OpenMP fork/join. A decode step
/// (n_q = 1) of 32 heads x 128 channels stays on the caller up to n_k = 2048.
inline constexpr int64_t kFlashParallelMinFlops = int64_t{1} << 25;

/// Causal attention, tiled: query i (position p = q_pos0 + i) of head h attends to keys j in [0, p] of kv head
/// h / (n_heads / n_kv_heads):
///   w_j = softmax_j( (q'_i . k'_j) / sqrt(head_dim) * softmax_scale_multiplier ),  out_i = sum_j w_j v_j,
/// with q' = R(p) q and k' = R(j) k per `rope` (or as given for kNone).
///
/// Algorithm: work items (kv head g, block of q_block queries) hold the kv_mul query heads of g together, so
/// one key/value tile serves all of them. Per item: queries loaded, rotated (ApplyRope, the same bits as the
/// library's RoPE) and multiplied by the scale; then for each key tile of k_block keys at or below the item's
/// last position (tiles above the diagonal are skipped): S = Q K^T (OpenBLAS sgemm, one thread), the online
/// softmax update (running max and sum, FlashSoftmaxTile; keys past a row's position masked), O = corr * O +
/// P V (sgemm, beta = 1); finally out = O / l. Keys are rotated once per call into scratch.k_rot (kQueriesAndKeys),
/// never per tile. Memory: scratch.k_rot (n_k * n_kv_heads * head_dim floats, only when keys are rotated) plus
/// per thread (2 * head_dim + k_block + 3) * kv_mul * q_block floats: never n_q x n_k.
/// Threads: OpenMP over items (largest first, dynamic) when the call has more than kFlashParallelMinFlops of work;
/// otherwise the calling thread only (decode). OpenBLAS is set to 1 thread for the call and restored after, so
/// do not change the BLAS thread count concurrently. Results do not depend on the thread count (each item is
/// computed by one thread in a fixed order): bit-identical for 1 and N threads.
///
/// Shapes:  see AttentionInputs (q [n_q, n_heads, head_dim], k and v [n_k, n_kv_heads, head_dim], token strides);
///          out [n_q, n_heads, head_dim] with token stride out_stride, overwritten; out must not overlap inputs.
/// Units:   positions in tokens; query i at q_pos0 + i, key j at j (n_q < n_k: chunked prefill or decode
///          against a cache).
/// Errors:  as CausalAttention: ShapeError (dims, strides, null data, out_stride); RangeError (q_pos0 < 0 or a
///          query position >= n_k); ConfigError (softmax_scale_multiplier <= 0 or not finite). With RoPE:
///          ShapeError if table.half < 1, 2 * half > head_dim or cos/sin are null; RangeError if table.n_rows < n_k.
///          ConfigError if tiling.q_block < 0 or tiling.k_block < 1. Each message names the field and the value.
/// Source:  Dao et al. 2022 (FlashAttention) Algorithm 1 (tiling, online softmax; Milakov & Gimelshein 2018);
///          PyTorch's CPU flash attention (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp: cpublas::gemm per
///          block); RoPE: Su et al. 2021 Sec. 3.4.2; GQA: Ainslie et al. 2023.
/// Precision: float32 throughout; exp within 1 ulp. Agrees with the float64 definition (n = visible keys,
///          u = 2^-24, first order) within |out - ref| <= sum_j w_j |v_j| (2 dS + u |s_j - max s| + (2 n +
///          6 tiles + 8) u), dS = scale (head_dim + 6) u max_j sum_d |q'_d| |k'_jd| bounding the score error
///          (rotation, scale folding, dot product); derived and enforced in tests/attention/flash_attention_test.cc.
/// Non-finite values are not checked (it would cost a pass over q, k and v): scores must stay finite. A score
///          that overflows float32 (|q'.k'| * scale > 3.4e38, e.g. entries ~1e19) makes its row NaN
///          (CausalAttention happened to return numbers for such rows; neither result means anything); a NaN in
///          v reaches every query of the tiles that hold that key (a masked weight is an exact 0, and 0 * NaN is
///          NaN in the P V product).
void FlashCausalAttention(const AttentionDims& dims, const AttentionInputs& in, const FlashRope& rope,
                          float softmax_scale_multiplier, float* out, int64_t out_stride, FlashScratch& scratch,
                          const FlashTiling& tiling = {});

}  // namespace posenc
