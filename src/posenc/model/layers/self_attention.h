// Causal self-attention with grouped KV heads and RoPE on Q and K, forward beside backward (llm.c's
// attention_forward / attention_backward, with the FlashAttention-2 recomputation instead of stored weights).
//
// Legend (row-major, innermost last):
//   batch     sequences; ctx  tokens per sequence; token t of each sequence sits at position t
//   H, G      query heads (n_heads) and key/value heads (n_kv_heads); query head h reads kv head h / (H / G)
//   D         head_dim; R = table.half rotary pairs (rotary_dim = 2R <= D: partial rotary leaves [2R, D) as is)
//   qkv       [batch, ctx, (H + 2G) D]: row = [q heads 0..H-1 | k heads 0..G-1 | v heads 0..G-1], the output
//             of the fused q/k/v projection (unrotated)
//   qk_rot    [batch, ctx, (H + G) D]: the queries and keys the attention used (rotated), saved for backward
//   out       [batch, ctx, H D]: attention output, before the output projection
//   lse       [batch, ctx, H]: per head-row softmax normaliser in base 2, log2(sum_j exp(s_j)), saved
//
// Math per query head h of token i (position p = i), keys j <= p:
//   s_j = (q_p . k_j) * scale,  scale = softmax_scale_multiplier / sqrt(D),
//   out = sum_j softmax(s)_j v_j,  with q_p = R(p) q_raw, k_j = R(j) k_raw (RoPE, never on v).
// Pre-rotation (dynamic scaling, YaRN paper Sec. 3.3; posenc/attention/pre_rotation.h): a query row p that
// has its own table uses q_p = R(p theta_p) q_raw and k_j = R(j theta_p) k_raw for every key; other rows use
// `table` as above.
//
// Gradients accumulate (+=) into dqkv, and the caller zeroes it first. The gradients of q and k are carried
// back through RoPE by the transposed rotation (ApplyRope with RopeDirection::kBackward: exact for any
// cos/sin, attention_factor folded in or not).
//
// Types: float runs the Highway tile kernels (posenc/kernels/attention_kernels.h: AttendTile with the base-2
// log-sum-exp, AttendTileBackward recomputing the weights), one task per (sequence, kv head) on the worker
// threads (each task owns its output rows and its kv head's gradients, so nothing is shared and the result does
// not depend on the thread count). float64 runs a plain single-threaded implementation of the definition
// (the gradient checks).
//
// Why recompute (FlashAttention) instead of keeping the weights: stories260K's shape keeps batch * layers *
// heads * ctx^2 / 2 weights, 2.7 GB per step at ctx 2048 (168 MB at 512), written in the forward and read back in
// the backward, while recomputing them costs one score dot product and one exp per key and head (measured in
// `posenc bench --filter train_attention`, BENCHMARKS.md).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/layout.h"

namespace posenc {

/// How RoPE enters one self-attention call.
struct AttentionRope {
  CosSinView table{};  // [>= ctx, R]: row t rotates q_t and k_t (attention_factor folded in, if any);
                       // R = 0 (cos == nullptr): no RoPE (sinusoidal, learned or no positional encoding)
  RopeLayout layout = RopeLayout::kInterleaved;
  const PreRotationTables* pre_rotation = nullptr;  // optional: query rows with their own key rotation
                                                    // (interleaved layout only, as the tables are)
  double softmax_scale_multiplier = 1.0;            // multiplies 1/sqrt(D) (DeepSeek yarn mscale; else 1)
};

/// Shape of one self-attention call.
struct SelfAttentionShape {
  int64_t batch = 0;
  int64_t ctx = 0;
  AttentionDims dims;  // n_heads H, n_kv_heads G, head_dim D

  int64_t qkv_width() const { return (dims.n_heads + 2 * dims.n_kv_heads) * dims.head_dim; }
  int64_t qk_width() const { return (dims.n_heads + dims.n_kv_heads) * dims.head_dim; }
  int64_t out_width() const { return dims.n_heads * dims.head_dim; }
};

/// Per-thread scratch of the float path (key blocks, gradient blocks); grows to the largest call, is reused.
class SelfAttentionWorkspace {
 public:
  SelfAttentionWorkspace();
  ~SelfAttentionWorkspace();
  SelfAttentionWorkspace(const SelfAttentionWorkspace&) = delete;
  SelfAttentionWorkspace& operator=(const SelfAttentionWorkspace&) = delete;

  struct Scratch;
  /// One scratch per work piece (thread). Internal to the layer.
  std::vector<std::unique_ptr<Scratch>>& slots() { return slots_; }

 private:
  std::vector<std::unique_ptr<Scratch>> slots_;
};

/// Checks a call's shape and RoPE. Errors: ShapeError naming the field if dims are invalid
/// (ValidateAttentionDims), batch or ctx < 0, the table's cos/sin is null with R > 0, 2R > D, the
/// pre-rotation tables' half differs from R or there is no static table beside them, or the layout is
/// half-split with pre-rotation; RangeError if the table or the pre-rotation tables have fewer than ctx rows;
/// ConfigError if softmax_scale_multiplier is not finite and > 0.
void ValidateSelfAttention(const SelfAttentionShape& shape, const AttentionRope& rope);

/// Forward: rotates q and k into qk_rot, then causal attention with GQA, saving lse.
///
/// Shapes:  see the legend: qkv [batch, ctx, (H + 2G) D] (read); qk_rot [batch, ctx, (H + G) D], out
///          [batch, ctx, H D], lse [batch, ctx, H] (overwritten). No output may overlap another or qkv.
/// Errors:  ValidateSelfAttention's; ShapeError if a pointer is null while batch * ctx > 0.
/// Source:  Vaswani et al. 2017 eq. 1; Su et al. 2021 (RoPE); Ainslie et al. 2023 (GQA); Dao 2023
///          (FlashAttention-2, the saved log-sum-exp).
/// Precision: float: as CausalAttention (Exp2 within 2 ulp, fused multiply-adds on AVX2/AVX3); float64: exact
///          to rounding.
template <typename T>
void SelfAttentionForward(const SelfAttentionShape& shape, const AttentionRope& rope, const T* qkv, T* qk_rot,
                          T* out, T* lse, SelfAttentionWorkspace& workspace);

/// Backward: dqkv += dL/dqkv given dout = dL/dout, from the forward's qkv, qk_rot, out and lse (the weights are
/// recomputed, never stored).
///
/// Shapes:  as the forward; dout [batch, ctx, H D]; dqkv [batch, ctx, (H + 2G) D] +=, laid out as qkv (the
///          q and k parts are gradients of the UNROTATED projections).
/// Errors:  as the forward (with the same shape and rope as the forward call).
/// Source:  Dao 2023, FlashAttention-2, Algorithm 2 (dS = P (dP - rowsum(dO o O))); RoPE backward = R^T.
template <typename T>
void SelfAttentionBackward(const SelfAttentionShape& shape, const AttentionRope& rope, const T* qkv,
                           const T* qk_rot, const T* out, const T* lse, const T* dout, T* dqkv,
                           SelfAttentionWorkspace& workspace);

}  // namespace posenc
