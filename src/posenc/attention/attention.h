// Causal scaled-dot-product attention with grouped KV heads, over keys that RoPE has already rotated
// (static positions) or that each query row rotates itself (pre-rotation, see pre_rotation.h).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "posenc/attention/pre_rotation.h"

namespace posenc {

/// Head counts of one attention layer.
struct AttentionDims {
  int64_t n_heads = 0;     // query heads
  int64_t n_kv_heads = 0;  // key/value heads; query head h reads kv head h / (n_heads / n_kv_heads)
  int64_t head_dim = 0;    // channels per head
};

/// Throws ShapeError naming the field and value unless n_heads, n_kv_heads, head_dim > 0 and
/// n_heads % n_kv_heads == 0.
void ValidateAttentionDims(const AttentionDims& dims);

/// Queries, keys and values of one sequence, row-major with a token stride (so they can be column slices of
/// a wider buffer).
struct AttentionInputs {
  const float* q = nullptr;  // [n_q, n_heads, head_dim], token stride q_stride
  int64_t n_q = 0;
  int64_t q_stride = 0;      // elements between consecutive queries (>= n_heads * head_dim)
  int64_t q_pos0 = 0;        // position of query 0; query i sits at q_pos0 + i (tokens)
  const float* k = nullptr;  // [n_k, n_kv_heads, head_dim], token stride kv_stride; key j at position j
  const float* v = nullptr;  // [n_k, n_kv_heads, head_dim], token stride kv_stride
  int64_t n_k = 0;
  int64_t kv_stride = 0;     // elements between consecutive keys/values (>= n_kv_heads * head_dim)
};

/// The checks every causal attention entry point makes (CausalAttention, CausalAttentionPreRotation,
/// FlashCausalAttention), `name` prefixing each message: ShapeError if n_q or n_k < 0 or, when n_q > 0, q, k, v or
/// out is null (named), q_stride < n_heads * head_dim, kv_stride < n_kv_heads * head_dim or out_stride <
/// n_heads * head_dim; RangeError if q_pos0 < 0 or q_pos0 + n_q > n_k. Nothing is checked past n_q == 0 (a no-op
/// call). dims must already be valid (ValidateAttentionDims).
void ValidateAttentionCall(const AttentionDims& dims, const AttentionInputs& in, const float* out,
                           int64_t out_stride, const char* name);

/// How scores become weights beyond the causal mask (every field's default: plain causal attention).
struct ScoreOptions {
  /// Scores use s^-1/2 with s = query_pre_attn_scalar (Gemma 2/3) instead of head_dim (SoftmaxScale).
  std::optional<double> query_pre_attn_scalar;
  /// > 0: query i at position p sees keys j in [max(0, p - window + 1), p] only (sliding-window attention:
  /// transformers' sliding_window mask, llama.cpp LLAMA_SWA_TYPE_STANDARD); 0: every key up to p.
  int64_t window = 0;
  /// > 0: scores s -> softcap * tanh(s / softcap) before the softmax (Gemma 2 attn_logit_softcapping).
  double softcap = 0;
};

/// Checks ScoreOptions. Errors: ConfigError naming the field if window < 0, softcap < 0 or not finite, or
/// query_pre_attn_scalar not finite and > 0.
void ValidateScoreOptions(const ScoreOptions& options);

/// Reusable buffers of the attention kernels (one per thread; they grow to the largest call and are kept).
struct AttentionScratch {
  std::vector<float> kb;      // [n_kv_heads, ceil(n_k/8), head_dim, 8]: keys in key blocks (attention_kernels.h)
  std::vector<float> vb;      // [n_kv_heads, ceil(n_k/8), head_dim, 8]: values in key blocks
  std::vector<float> kb_raw;  // [n_kv_heads, ceil(n_k/8), head_dim, 8]: unrotated keys (pre-rotation only)
  std::vector<float> q_rot;   // [tile rows, n_heads, head_dim]: queries rotated by their own row (pre-rotation)
  std::vector<const float*> cs;  // [tile rows]: each pre-rotation row's cos/sin table (PreRotationTables::row)
};

/// Causal attention: query i (position p = q_pos0 + i) of head h attends to keys j in [0, p] of kv head
/// h / (n_heads / n_kv_heads) (a window narrows them, see ScoreOptions):
///   w_j = softmax_j( cap((q_i . k_j) * SoftmaxScale(head_dim, query_pre_attn_scalar, softmax_scale_multiplier)) ),
///   out_i = sum_j w_j v_j, cap the soft-cap when set, else the identity.
/// q and k must already carry their RoPE rotation (never v). The softmax subtracts the row maximum first.
///
/// Shapes:  see AttentionInputs; out [n_q, n_heads, head_dim] with token stride out_stride. out must not
///          overlap the inputs.
/// Errors:  ShapeError (dims invalid, a stride smaller than its row, null q, k, v or out for n_q > 0:
///          ValidateAttentionCall); RangeError if a query position q_pos0 + i is >= n_k (its causal keys are
///          missing) or q_pos0 < 0;
///          ConfigError if softmax_scale_multiplier <= 0 or not finite (SoftmaxScale), or the options are invalid
///          (ValidateScoreOptions).
/// Source:  Vaswani et al. 2017 eq. 1; llama2.c run.c `forward` (attention block, GQA via kv_mul).
/// Kernel:  kernels::AttendTile (posenc/kernels/attention_kernels.h; Highway, runtime dispatch) on tiles of up
///          to 16 query rows per KV head, keys in chunks of 256 with an online softmax.
/// Precision: float32 throughout (as the oracle and llama2.c); softmax in base 2 with q pre-scaled by
///          scale * log2(e), Exp2 within 2 ulp; dot products and weighted sums fused (MulAdd) on AVX2/AVX3.
/// Non-finite inputs are not checked: a NaN in v can reach queries before its key (masked lanes of a key block
///          multiply it by 0), and a NaN in q or k is not guaranteed to propagate.
void CausalAttention(const AttentionDims& dims, const AttentionInputs& in, float softmax_scale_multiplier,
                     float* out, int64_t out_stride, AttentionScratch& scratch, const ScoreOptions& options = {});

/// Pre-rotation causal attention (dynamic scaling with an unrotated key cache; YaRN paper Sec. 3.3). For a
/// query position p with tables.shared(p) this is CausalAttention on `rotated`; for any other p the score
/// against key j is (R(p theta_p) q_p) . (R(j theta_p) k_j) computed from `raw` and row p of `tables`:
/// per pair i with q' = R(p theta_p) q_p, (a, b) = raw k_j pair i, (c, s) = cos/sin of j theta_p,i:
///   q'_a (a c - b s) + q'_b (a s + b c);  channels past 2*half (partial rotary) contribute q'.k as is.
/// Positions of q_pos0 + i must be < tables.n_rows().
///
/// Shapes:  rotated and raw describe the same tokens (same n_q, q_pos0, n_k, values), rotated with the
///          shared (static) table and unrotated respectively; RoPE layout interleaved (pairs 2i, 2i+1).
/// Errors:  as CausalAttention; ShapeError if rotated and raw disagree in n_q / q_pos0 / n_k or tables.half()
///          * 2 > head_dim; RangeError if a query position is >= tables.n_rows().
/// Source:  YaRN paper Sec. 3.3 ("dynamic scaling"); the numpy oracle's `attention_dynamic`.
/// Note:    when every query row is shared this is exactly CausalAttention(dims, rotated, ...) (same calls, same
///          bits); otherwise rows are tiled in runs of shared rows (16, one KV head per kernel call) and
///          own-table rows (8, all KV heads in one call, so each row's table is read once per call).
void CausalAttentionPreRotation(const AttentionDims& dims, const AttentionInputs& rotated,
                                const AttentionInputs& raw, const PreRotationTables& tables,
                                float softmax_scale_multiplier, float* out, int64_t out_stride,
                                AttentionScratch& scratch, const ScoreOptions& options = {});

}  // namespace posenc
