// Causal attention under a training-free position map (attention/position_map.h): q and k rotated at the
// map's positions per score set, each pair scored from its set.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/attention/attention.h"
#include "posenc/attention/position_map.h"
#include "posenc/core/rope_enums.h"

namespace posenc {

/// The RoPE a position map rotates with: the layer's static frequencies and magnitude.
struct MappedRope {
  const float* inv_freq = nullptr;  // [half], radians/token (a layer's RopeFrequencies::inv_freq)
  int64_t half = 0;                 // rotary_dim / 2; channels past rotary_dim are not rotated
  double magnitude = 1.0;           // multiplies cos and sin (attention_factor times the file's magnitude)
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// Causal attention of n tokens whose queries and keys are not yet rotated: query row i (position
/// positions[i]) of head h attends to key rows j <= i of kv head h / (n_heads / n_kv_heads) that map.Select
/// keeps (and the window of `options` keeps), with
///   score_ij = cap( (R(QueryPosition(s, p_i)) q_i) . (R(KeyPosition(s, p_j)) k_j) * scale ),
///   s = map.Select(p_i, p_j), scale = SoftmaxScale(head_dim, query_pre_attn_scalar, softmax_scale_multiplier),
/// R(x) the RoPE rotation at position x: pair k turns by x * inv_freq[k], cos and sin times magnitude; then
/// w_ij = softmax_j(score_ij), out_i = sum_j w_ij v_j.
///
/// Shapes:  in.q [n, n_heads, head_dim] (unrotated), in.k / in.v [n, n_kv_heads, head_dim] (k unrotated), with
///          their strides; n = in.n_q = in.n_k, in.q_pos0 = 0 (rows are the tokens of `positions`);
///          positions [n], non-decreasing; out [n, n_heads, head_dim] with token stride out_stride, not
///          overlapping the inputs.
/// Errors:  as CausalAttention (ValidateAttentionCall, SoftmaxScale, ValidateScoreOptions); ShapeError if
///          n_q != n_k, q_pos0 != 0, positions.size() != n, rope.inv_freq is null with half > 0, or 2 * half >
///          head_dim; RangeError naming the row if positions decrease.
/// Source:  the maps' own papers (model/position_maps/); angles as RopePrecision::kExact (float32 inv_freq times
///          the position in double, cos and sin in double, times magnitude, rounded once to float32).
/// Cost:    O(n^2 head_dim) per head and score set through GemmNT / GemmNN (blocks of 64 queries), plus one
///          selection per (query, key) pair shared by the heads: a reference path, not a fused kernel. Memory:
///          n^2 bytes for the selections plus 2 x 64 x n floats of scores per call.
void MappedCausalAttention(const AttentionDims& dims, const AttentionInputs& in, std::span<const int64_t> positions,
                           const PositionMap& map, const MappedRope& rope, float softmax_scale_multiplier,
                           float* out, int64_t out_stride, const ScoreOptions& options = {});

}  // namespace posenc
