// Context-parallel causal attention (Ring Attention): each rank holds the queries, keys and values of some
// positions of a window; K/V blocks travel around a ring of ranks while every rank merges what its queries see
// into an online softmax. Positions are global throughout (RoPE rows, the causal mask), so the result is the
// single-process attention of the whole window. The transport is a Communicator (dist/communicator.h): MPI for
// real ranks, threads for simulated ones.
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/context_split.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/dist/communicator.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/layout.h"

namespace posenc {

/// RoPE of context-parallel attention by global position: the fields of a window forward pass (ForwardRope)
/// plus the layout.
struct RingRope {
  CosSinView table;  // [>= n_tokens, half]: row p rotates q and k at global position p (attention_factor folded
                     // in, if any); cos == nullptr: q and k are used as given (already rotated, or no RoPE)
  const PreRotationTables* pre_rotation = nullptr;  // optional (dynamic scaling): see RingCausalAttention
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// This rank's tokens: the positions of split.ranges[rank], concatenated in ascending order (local index i is
/// the i-th of them). Unrotated: the call rotates with global positions.
struct RingAttentionInputs {
  const float* q = nullptr;  // [n_local, n_heads, head_dim], token stride q_stride
  int64_t q_stride = 0;      // elements between consecutive tokens (>= n_heads * head_dim)
  const float* k = nullptr;  // [n_local, n_kv_heads, head_dim], token stride kv_stride
  const float* v = nullptr;  // [n_local, n_kv_heads, head_dim], token stride kv_stride
  int64_t kv_stride = 0;     // elements between consecutive tokens (>= n_kv_heads * head_dim)
};

/// What one call did on this rank. Counts are exact; times are wall-clock seconds (steady_clock), for
/// measurements only (nothing depends on them).
struct RingStats {
  int64_t steps = 0;         // ring steps (= n_ranks)
  int64_t bytes_sent = 0;    // K/V bytes this rank sent (n_ranks - 1 blocks)
  int64_t pairs = 0;         // (query head, key) pairs attended: the causal work of this rank's queries
  double compute_s = 0;      // computing attention on the block in hand (transfers in flight meanwhile)
  double wait_s = 0;         // blocked in FinishExchange after computing: transfer time NOT hidden
  double total_s = 0;        // the whole call, setup and output included

  /// Adds another call's counts and times (e.g. summing the layers of a forward pass).
  RingStats& operator+=(const RingStats& o) {
    steps += o.steps;
    bytes_sent += o.bytes_sent;
    pairs += o.pairs;
    compute_s += o.compute_s;
    wait_s += o.wait_s;
    total_s += o.total_s;
    return *this;
  }
};

/// Buffers of RingCausalAttention, reused across calls (they grow to the largest call and are kept).
struct RingScratch {
  std::vector<float> block[2];  // [2, max block, n_kv_heads * head_dim]: K then V of the block in hand / arriving
  std::vector<float> k_static;  // [max block, n_kv_heads * head_dim]: raw keys rotated statically (pre-rotation)
  std::vector<float> k_row;     // [max block, head_dim]: keys of one KV head rotated by a query row's own table
  std::vector<float> q, o;      // [n_local * n_heads, head_dim]: scaled queries and accumulators, item-major
  std::vector<float> m, l;      // [n_local * n_heads]: running max and sum, item-major
  std::vector<float> s, corr;   // [tile rows, k_block], [tile rows]: the current tile
  std::vector<int64_t> valid, n_visible;  // [tile rows]
  std::vector<int64_t> rows;    // [max(q_block, max block)]: cos/sin rows of an item's queries or of a range's keys
  CosSinTable row_table;        // [max block, half]: one query row's own cos/sin for the keys of a segment
};

/// Causal attention of a whole window, computed by the ranks of `comm` together (Ring Attention, Liu et al.
/// 2023): rank r (= comm.rank()) holds positions split.ranges[r] and returns their outputs. Query at global
/// position p of head h attends to keys j in [0, p] of kv head h / (n_heads / n_kv_heads):
///   w_j = softmax_j( (q'_p . k'_j) / sqrt(head_dim) * softmax_scale_multiplier ),  out_p = sum_j w_j v_j,
/// q'_p = R(p) q_p and k'_j = R(j) k_j with rows p and j of rope.table; for a query row p that
/// rope.pre_rotation does not mark shared, q'_p = R_p(p) q_p and k'_j = R_p(j) k_j with row p's own cos/sin of
/// j theta_p (the pre-rotation semantics of pre_rotation.h, YaRN paper Sec. 3.3).
///
/// Algorithm: every rank prepares its K/V block once: keys rotated with their global positions (unrotated with
/// pre_rotation, since each query row rotates them with its own frequencies), then K and V. Step s = 0 .. N-1:
/// the rank holds the block of rank (r - s) mod N; it starts sending that block to rank r + 1 and receiving rank
/// r - 1's (Communicator::StartExchange; not at the last step), merges the block into the online-softmax state of
/// each of its query items (FlashAccumulate: key tiles of tiling.k_block per contiguous key range, the causal mask
/// on global positions, ranges no query of the item can see skipped), then waits for the transfer
/// (FinishExchange). Finally out = O / l. Items: (kv head, run of <= q_block consecutive positions of one
/// range), as FlashCausalAttention; rows with their own pre-rotation table are items of one position. The merge
/// order is fixed (steps in ring order, a block's ranges ascending, key tiles ascending), so the result is
/// deterministic and bit-identical whatever the transport (MPI or threads) and its timing.
/// Threads: the calling thread only (one rank per core); the BLAS library is set to one thread for the call.
///
/// Shapes:  in (see RingAttentionInputs; n_local = split.Count(r)); out [n_local, n_heads, head_dim] with token
///          stride out_stride, overwritten; out must not overlap the inputs.
/// Units:   positions in tokens, global in [0, split.n_tokens).
/// Errors:  ShapeError (dims invalid; a stride smaller than its row; q, k, v or out null with n_local > 0;
///          split.n_ranks() != comm.size(); rope table half < 1, 2 * half > head_dim or cos/sin null;
///          pre_rotation without a table or with another half); RangeError (split.ranges not a partition of
///          [0, n_tokens) into ascending non-empty ranges; rope table or pre_rotation rows fewer than n_tokens);
///          ConfigError (softmax_scale_multiplier <= 0 or not finite; tiling.q_block < 0 or k_block < 1);
///          DistError from the communicator (a peer failed or timed out, a block of the wrong size arrived).
/// Source:  Liu, Zaharia, Abbeel 2023, "Ring Attention with Blockwise Transformers" (Sec. 3, Algorithm 1);
///          online softmax: Milakov & Gimelshein 2018, Dao et al. 2022 Algorithm 1; zigzag balance:
///          TransformerEngine context parallelism (context_split.h).
/// Precision: float32. Against the float64 definition the bound of FlashCausalAttention holds with `tiles`
///          counted per row over every key tile it sees, tiles being cut at block-range boundaries too: merging a
///          block is one more rescale of O and l (exp 1 ulp + one product each); the exp arguments' rounding
///          telescopes to u |s_j - max s| as in one pass. Derived and enforced in
///          tests/attention/ring_attention_test.cc.
void RingCausalAttention(const AttentionDims& dims, const ContextSplit& split, const RingAttentionInputs& in,
                         const RingRope& rope, float softmax_scale_multiplier, float* out, int64_t out_stride,
                         Communicator& comm, RingScratch& scratch, const FlashTiling& tiling = {},
                         RingStats* stats = nullptr);

}  // namespace posenc
