// Context-parallel attention of a whole window with N ranks simulated by threads of this process: the same
// RingCausalAttention each MPI rank runs, over an in-memory ring (dist/in_process.h).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/context_split.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/attention/ring_attention.h"

namespace posenc {

/// A whole window, by global position (what a single process would hand to CausalAttention, unrotated).
struct WindowQkv {
  const float* q = nullptr;  // [n_tokens, n_heads, head_dim], token stride q_stride
  int64_t q_stride = 0;
  const float* k = nullptr;  // [n_tokens, n_kv_heads, head_dim], token stride kv_stride
  const float* v = nullptr;  // [n_tokens, n_kv_heads, head_dim], token stride kv_stride
  int64_t kv_stride = 0;
};

/// Runs RingCausalAttention on split.n_ranks() simulated ranks (RunInProcess): rank r takes the rows of `window`
/// at its positions, and its outputs are written back to their global rows of `out`.
///
/// Shapes:  window as WindowQkv with n_tokens = split.n_tokens; out [n_tokens, n_heads, head_dim] with token
///          stride out_stride, overwritten; stats (optional) resized to [n_ranks], rank r's RingStats.
/// Errors:  as RingCausalAttention (the first failing rank's exception); ShapeError for a null window pointer or
///          a stride smaller than its row.
/// Precision: bit-identical to N MPI ranks running RingCausalAttention on the same split (same operations in the
///          same order on every rank).
void SimulateRingAttention(const AttentionDims& dims, const ContextSplit& split, const WindowQkv& window,
                           const RingRope& rope, float softmax_scale_multiplier, float* out, int64_t out_stride,
                           const FlashTiling& tiling = {}, std::vector<RingStats>* stats = nullptr);

/// Rows of `src` at the positions of `ranges` (ascending), packed: dst row i = src row of the i-th position.
/// Shapes: src [>= max position + 1, row] with token stride src_stride; dst [count, row] contiguous.
void GatherPositionRows(const std::vector<PositionRange>& ranges, const float* src, int64_t src_stride, int64_t row,
                        float* dst);

/// The inverse of GatherPositionRows: src row i goes to the global row of the i-th position of `ranges`.
void ScatterPositionRows(const std::vector<PositionRange>& ranges, const float* src, int64_t row, float* dst,
                         int64_t dst_stride);

}  // namespace posenc
