// Inner loops of causal attention for small heads (stories260K: head_dim 8): a tile of consecutive query rows,
// all query heads of one KV group, against that KV head's keys and values in key blocks. Pointers, sizes and
// strides only (no validation, no exceptions, no I/O): the callers in posenc/attention/attention.cc check every
// shape first. The Highway path (attention_kernels.cc, runtime dispatch) is what the library runs;
// AttendTileScalar (attention_kernels_scalar.cc) is the plain reference the tests hold it to.
//
// Key blocks (posenc/kernels/key_blocks.h, PackKeyBlocks): [n_blocks, head_dim, 8], entry (block b,
// channel d, lane l) = channel d of key 8b + l, zero past the last key.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// One attention call on a tile of n_rows consecutive query rows of n_groups consecutive KV groups. Row i
/// (0-based in the tile) sits at position pos0 + i and attends to keys [0, pos0 + i] (with a window W: keys
/// [max(0, pos0 + i - W + 1), pos0 + i]). Preconditions (checked by the caller): n_rows >= 1, n_groups >= 1,
/// pos0 >= 0, kv_mul >= 1, head_dim >= 1, window >= 0, softcap >= 0, the blocks cover key pos0 + n_rows - 1.
struct AttendTileArgs {
  const float* q;        // [n_rows, n_groups, kv_mul, head_dim]: row i at q + i * q_stride, heads contiguous
                         // (group g's heads from g * kv_mul * head_dim); rotated
  int64_t q_stride;      // floats between query rows
  int64_t n_rows;        // query rows in the tile
  int64_t pos0;          // position of row 0 (tokens)
  int64_t kv_mul;        // query heads sharing the KV head (GQA group size)
  int64_t head_dim;
  int64_t n_groups = 1;  // KV heads handled in this call (their rows share one pre-rotation table read)
  int64_t group_stride = 0;  // floats from one KV head's blocks to the next in kb and vb
  const float* kb;       // [n_groups][>= NumKeyBlocks(pos0 + n_rows), head_dim, 8]: keys (rotated, or raw: cs)
  const float* vb;       // [n_groups][>= NumKeyBlocks(pos0 + n_rows), head_dim, 8]: values
  float scale;           // score multiplier: 1 / sqrt(head_dim) * softmax_scale_multiplier
  int64_t window = 0;    // > 0: sliding window of that many keys (the row's own included); 0: all earlier keys
  float softcap = 0.0f;  // > 0: scores s -> softcap * tanh(s / softcap) before the softmax (Gemma 2)
  // Pre-rotation (optional): cs[i] != nullptr makes row i rotate every raw key by its own table before the
  // dot product: cs[i] is [NumKeyBlocks(pos0 + i + 1), 2, half, 8] (cos then sin of key 8b + l for pair i;
  // pre_rotation.h), pairs interleaved (2k, 2k + 1), channels [2 half, head_dim) unrotated; q is then already
  // rotated by the row's own angle. cs == nullptr: kb holds rotated keys for every row.
  const float* const* cs;  // [n_rows] or nullptr
  int64_t half;            // rotary pairs when cs is set: 1 <= half, 2 half <= head_dim
  float* out;            // [n_rows, n_groups, kv_mul, head_dim]: row i at out + i * out_stride, overwritten
  int64_t out_stride;
  // Optional (training): lse != nullptr receives each head-row's softmax normaliser in base 2,
  // lse = log2(sum_j exp(s_j)) with s_j = q . k_j * scale, at lse + i * lse_stride + h (h: the head within
  // the call, [0, n_groups * kv_mul)); AttendTileBackward recomputes the weights from it.
  float* lse = nullptr;  // [n_rows, n_groups * kv_mul], row stride lse_stride; overwritten
  int64_t lse_stride = 0;
};

/// Highway path (AVX3 / AVX2 / SSE4 / SSSE3 / SCALAR, best the CPU has).
///
/// Math:    s_j = q . k_j * scale (soft-capped when softcap > 0: hwy Tanh, within 4 ulp), out = sum_j e_j v_j /
///          sum_j e_j over the row's keys, e_j = exp(s_j - m), m a running maximum;
///          computed in base 2: q is multiplied by scale * log2(e) once, e_j = Exp2(t_j - m2) (Exp2Kernel).
/// Order:   keys in chunks of kAttendChunkKeys (a chunk's keys and values stay in cache, L1 or L2 by head_dim,
///          while every row and head of the tile passes over it); per chunk, scores of one head-row, then the
///          online-softmax update (FlashAttention, Dao et al. 2022, Sec. 3.1: accumulators rescaled by
///          2^(m_old - m_new) when the maximum grows), then the weighted sum of values (per head-row the same
///          sum in key order; for four heads at a time with each value vector loaded once for them). Dot products and weighted sums use MulAdd (fused on
///          AVX2/AVX3, separately rounded on SSE4/SSSE3/SCALAR).
/// Precision: float32; differs from AttendTileScalar by rounding only (bound derived in the tests).
void AttendTile(const AttendTileArgs& args);

/// Scalar reference: two passes per head-row (scores, max, exp, weighted sum), plain loops in the order of
/// the definition, exp = ExpF32 (exp_kernel.h, Cephes, 2 ulp), no fused multiply-adds. Same contract.
void AttendTileScalar(const AttendTileArgs& args);

/// One backward call (training) on a tile of n_rows consecutive query rows of ONE KV group: the gradients of
/// AttendTile's output with respect to q, k and v, recomputing the attention weights from the saved base-2
/// normaliser (FlashAttention-2 backward, Dao 2023, Algorithm 2, on a CPU: no score matrix is stored). Full
/// causal attention without soft-capping only (the forward's window and softcap are 0).
/// Preconditions as AttendTileArgs (n_groups is 1 here), plus: lse holds AttendTile's values for these rows.
///
/// Math, per query head r of row i (position p = pos0 + i) and key j <= p, with s_ij = q_i . k_j * scale:
///   P_ij = exp(s_ij - lse_i ln 2)      (the forward's weights)
///   D_i  = dout_i . out_i
///   dS_ij = P_ij (dout_i . v_j - D_i)
///   dq_i += scale * sum_j dS_ij k_j,   dk_j += scale * sum_i dS_ij q_i,   dv_j += sum_i P_ij dout_i.
/// Pre-rotation rows (cs[i] != nullptr): kb holds raw keys, k_j above is R(j theta_p) k_j (rotated with the
/// row's table as in AttendTile), dq_i is the gradient for the row-rotated query, and the key gradient is
/// carried back to the raw key: dk_j += R(j theta_p)^T (scale * sum dS_ij q_i) (interleaved pairs).
struct AttendTileBackwardArgs {
  const float* q;            // [n_rows, kv_mul, head_dim] as the forward took it (rotated), row stride q_stride
  int64_t q_stride;
  const float* out;          // [n_rows, kv_mul, head_dim] the forward's output, row stride out_stride
  int64_t out_stride;
  const float* dout;         // [n_rows, kv_mul, head_dim] dL/d(out), row stride dout_stride
  int64_t dout_stride;
  const float* lse;          // [n_rows, kv_mul] AttendTile's base-2 normalisers, row stride lse_stride
  int64_t lse_stride;
  int64_t n_rows;
  int64_t pos0;
  int64_t kv_mul;
  int64_t head_dim;
  const float* kb;           // [>= NumKeyBlocks(pos0 + n_rows), head_dim, 8] keys (rotated, or raw with cs)
  const float* vb;           // [>= NumKeyBlocks(pos0 + n_rows), head_dim, 8] values
  float scale;               // as the forward's
  const float* const* cs;    // [n_rows] or nullptr: pre-rotation tables, as AttendTileArgs::cs
  int64_t half;              // rotary pairs when cs is set
  float* dq;                 // [n_rows, kv_mul, head_dim] += (row stride dq_stride)
  int64_t dq_stride;
  float* dkb;                // [>= NumKeyBlocks(pos0 + n_rows), head_dim, 8] += key gradients in key blocks
  float* dvb;                // [>= NumKeyBlocks(pos0 + n_rows), head_dim, 8] += value gradients
};

/// Highway path. Order: per row, per key block, the weights and dS of every head of the group (scores as
/// AttendTile's, in base 2, so P = Exp2(t - lse) reproduces the forward's weights), then dv and dk of the
/// block (one load and store for all heads) and the lane accumulators of dq (kept in registers for head_dim 8
/// and 16 with kv_mul <= 2); dq is reduced across lanes once per row. dkb/dvb accumulate in memory, so rows
/// are visited in order and the result does not depend on threads (there are none here).
/// Precision: float32; differs from AttendTileBackwardScalar by rounding only (bound derived in the tests).
void AttendTileBackward(const AttendTileBackwardArgs& args);

/// Scalar reference of AttendTileBackward: one head-row at a time, keys in order, plain loops in the order of
/// the definition above, exp = ExpF32 (exp_kernel.h), no fused multiply-adds. Same contract.
void AttendTileBackwardScalar(const AttendTileBackwardArgs& args);

/// Keys per chunk of AttendTile (see there). A multiple of 8.
inline constexpr int64_t kAttendChunkKeys = 256;

/// 2^x in float32 for x in [-126, 0] (the exponent of a max-subtracted softmax in base 2), as AttendTile
/// computes it, one value (tests and benchmarks): n = round(x), r = x - n (exact), 2^r by a degree-6
/// polynomial on [-1/2, 1/2] (relative minimax error 2.0e-9, fitted here, float32 Horner with MulAdd), times
/// 2^n from the exponent bits. x < -126 returns 2^-126 (callers zero masked lanes themselves).
/// Precision: within 2 ulp of the correctly rounded 2^x on [-126, 0] (checked on a dense sweep per target).
float Exp2Kernel(float x);

/// Name of the Highway target AttendTile dispatches to ("AVX2", ...).
const char* AttendTileTargetName();

}  // namespace posenc::kernels
