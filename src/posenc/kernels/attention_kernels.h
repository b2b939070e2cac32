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
/// (0-based in the tile) sits at position pos0 + i and attends to keys [0, pos0 + i]. Preconditions (checked
/// by the caller): n_rows >= 1, n_groups >= 1, pos0 >= 0, kv_mul >= 1, head_dim >= 1, the blocks cover key
/// pos0 + n_rows - 1.
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
  // Pre-rotation (optional): cs[i] != nullptr makes row i rotate every raw key by its own table before the
  // dot product: cs[i] is [NumKeyBlocks(pos0 + i + 1), 2, half, 8] (cos then sin of key 8b + l for pair i;
  // pre_rotation.h), pairs interleaved (2k, 2k + 1), channels [2 half, head_dim) unrotated; q is then already
  // rotated by the row's own angle. cs == nullptr: kb holds rotated keys for every row.
  const float* const* cs;  // [n_rows] or nullptr
  int64_t half;            // rotary pairs when cs is set: 1 <= half, 2 half <= head_dim
  float* out;            // [n_rows, n_groups, kv_mul, head_dim]: row i at out + i * out_stride, overwritten
  int64_t out_stride;
};

/// Highway path (AVX3 / AVX2 / SSE4 / SSSE3 / SCALAR, best the CPU has).
///
/// Math:    s_j = q . k_j * scale,  out = sum_j e_j v_j / sum_j e_j,  e_j = exp(s_j - m), m a running maximum;
///          computed in base 2: q is multiplied by scale * log2(e) once, e_j = Exp2(t_j - m2) (Exp2Kernel).
/// Order:   keys in chunks of kAttendChunkKeys (a chunk's keys and values stay in L1 while every row and head
///          of the tile passes over it); per chunk, scores of one head-row, then the online-softmax update
///          (FlashAttention, Dao et al. 2022, Sec. 3.1: accumulators rescaled by 2^(m_old - m_new) when the
///          maximum grows), then the weighted sum of values. Dot products and weighted sums use MulAdd (fused on
///          AVX2/AVX3, separately rounded on SSE4/SSSE3/SCALAR).
/// Precision: float32; differs from AttendTileScalar by rounding only (bound derived in the tests).
void AttendTile(const AttendTileArgs& args);

/// Scalar reference: two passes per head-row (scores, max, exp, weighted sum), plain loops in the order of
/// the definition, exp = ExpF32 (exp_kernel.h, Cephes, 2 ulp), no fused multiply-adds. Same contract.
void AttendTileScalar(const AttendTileArgs& args);

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
