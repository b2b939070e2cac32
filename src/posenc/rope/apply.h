// apply_rope: rotate Q and K (never V) by their positions, forward, backward or inverse.
#pragma once

#include <cstdint>
#include <span>

#include "posenc/core/dtype.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/layout.h"

namespace posenc {

/// A strided 3-D view [n_tokens, n_heads, head_dim] of float32, bfloat16 or float16 elements. The last
/// dimension is contiguous; token_stride and head_stride are in elements, so [batch, seq, heads, dim]
/// (token = batch*seq, token_stride = heads*dim) and [batch, heads, seq, dim] (per batch: token_stride = dim,
/// head_stride = seq*dim) are both expressible, as are q/k slices of a packed qkv buffer. Strides may be
/// negative (|head_stride| >= head_dim); the caller owns every element the view reaches from `data`, and the
/// functions reject views whose (token, head) rows overlap.
struct HeadsView {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  int64_t token_stride = 0;  // elements between token t and t+1
  int64_t head_stride = 0;   // elements between head h and h+1

  /// A contiguous [n_tokens, n_heads, head_dim] float32 view.
  static HeadsView Contiguous(float* data, int64_t n_tokens, int64_t n_heads, int64_t head_dim) {
    return {data, DType::kF32, n_tokens, n_heads, head_dim, n_heads * head_dim, head_dim};
  }
  /// A contiguous [n_tokens, n_heads, head_dim] view of `dtype` elements.
  static HeadsView Contiguous(void* data, DType dtype, int64_t n_tokens, int64_t n_heads, int64_t head_dim) {
    return {data, dtype, n_tokens, n_heads, head_dim, n_heads * head_dim, head_dim};
  }
};

/// The checks every rotation makes of a view before touching memory (exposed for the C API's and the Python
/// binding's fuzz harness): shape >= 0, 1 <= half, 2*half <= head_dim; for a non-empty view, data not null,
/// |head_stride| >= head_dim, token_stride != 0, no two (token, head) rows overlapping, and the extent it
/// reaches, every t * token_stride + h * head_stride + c (elements, times the element size), representable in
/// int64_t and inside the address space from `data` (computed in 128 bits, so strides near INT64_MAX are
/// refused instead of wrapping). `name` starts the messages ("x", "q").
/// Errors: ShapeError naming the view, the field and its value.
void CheckHeadsView(const char* name, const HeadsView& x, int64_t half);

/// Rotates x in place: token t uses row rows[t] of `table`.
///
/// Shapes:  x [n_tokens, n_heads, head_dim] (strided, see HeadsView); rows [n_tokens] (for a RopeCache,
///          row = position id; for ComputeCosSin(positions), row = token index); table [n_rows, half].
/// Layout:  channels [0, 2*half) are rotated in `layout`; channels [2*half, head_dim) (partial rotary) are
///          not touched, so they stay bit-identical. bfloat16/float16 elements are widened to float32, rotated
///          in float32 and rounded to nearest even once.
/// Errors:  ShapeError if 2*half > head_dim, half < 1, a stride is smaller than the extent it skips, the
///          extent does not fit in 64-bit offsets, or data is null with n_tokens*n_heads > 0 (CheckHeadsView);
///          RangeError naming the token and row if a row is outside
///          [0, n_rows).
/// Source:  Su et al. 2021 (RoFormer) Sec. 3.4.2, eq. 34; HF `apply_rotary_pos_emb` (half-split),
///          GPT-J `rotate_every_two` (interleaved).
void ApplyRope(const HeadsView& x, std::span<const int64_t> rows, const CosSinView& table, RopeLayout layout,
               RopeDirection direction = RopeDirection::kForward);

/// Out-of-place ApplyRope: out = rotate(in). `in` and `out` have the same shape and dtype (strides may
/// differ); partial-rotary channels are copied bit-identically. They must not overlap unless they are the
/// same view (then it is the in-place call).
/// Threads: blocks of ~256 KiB of tokens are copied and rotated in turn (while in cache), on OpenMP threads when
///          the call moves >= kernels::kRopeParallelMinBytes; the result does not depend on the thread count.
/// Errors: as ApplyRope, plus ShapeError if the shapes or dtypes differ, or in and out share memory without
///         being the same view.
void ApplyRope(const HeadsView& in, const HeadsView& out, std::span<const int64_t> rows,
               const CosSinView& table, RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

/// Q and K in one call, in place: both use the same rows (one position per token); n_heads may differ (GQA).
/// Errors: as ApplyRope, plus ShapeError if q and k differ in n_tokens or head_dim, or share memory (a shared
///         row would be rotated twice).
void ApplyRopeQK(const HeadsView& q, const HeadsView& k, std::span<const int64_t> rows, const CosSinView& table,
                 RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

}  // namespace posenc

namespace posenc {

/// What the on-the-fly overloads need instead of a table: the frequencies, the attention factor and how the
/// angle is formed. inv_freq is borrowed (must outlive the call).
struct RopeOnTheFly {
  std::span<const float> inv_freq;  // [rotary_dim/2] float32, radians/token (RopeFrequencies::inv_freq)
  double attention_factor = 1.0;    // multiplies cos and sin (1.0: AttentionFold::kApart)
  RopePrecision precision = RopePrecision::kExact;

  /// From a frequency table: attention_factor folded (kFolded) or left out (kApart), as ComputeCosSin.
  static RopeOnTheFly From(const RopeFrequencies& f, RopePrecision precision = RopePrecision::kExact,
                           AttentionFold fold = AttentionFold::kFolded) {
    return {f.inv_freq, fold == AttentionFold::kFolded ? f.attention_factor : 1.0, precision};
  }
};

/// Rotates x in place by position ids with cos/sin computed inside the kernel (no table): per token, the
/// cos/sin of every pair are computed once (vectorised, kernels/sincos.h) and applied to all its heads.
///
/// Shapes:  x [n_tokens, n_heads, head_dim] (strided, see HeadsView); position_ids [n_tokens] (tokens, may be
///          negative); freqs.inv_freq [half], half = rotary_dim / 2.
/// Layout:  as the table overload (channels [2*half, head_dim) untouched; bf16/f16 rounded once).
/// Precision: the coefficients are those of ComputeCosSin(freqs, position_ids, precision) within 1 ulp (kExact,
///          and kHf with attention_factor 1; within 2 ulp for kHf with another factor, whose product HF rounds
///          in float32). kExact stays within 0.51 ulp of the true cos(inv_freq * pos) * attention_factor
///          (derivation in kernels/sincos.h). The rotation's bound is the table overload's (rope_kernels.h).
/// Errors:  as the table overload (ShapeError for a bad view, half < 1 or 2*half > head_dim); ShapeError if
///          position_ids has not n_tokens entries; ConfigError naming the index if an inv_freq entry is not
///          finite, or if attention_factor is not finite; RangeError naming the token and position if
///          |position| >= 2^29 or |position * inv_freq| >= 2^29 rad (kernels::kSinCosMaxAbs).
/// Source:  Su et al. 2021 (RoFormer) Sec. 3.4.2; angles as HF `LlamaRotaryEmbedding.forward` (kHf);
///          frequencies computed on the fly as flashinfer's `apply_rope_pos_ids`.
void ApplyRope(const HeadsView& x, std::span<const int64_t> position_ids, const RopeOnTheFly& freqs,
               RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

/// Q and K in one call, in place, cos/sin on the fly (computed once per token for both).
/// Errors: as the on-the-fly ApplyRope, plus ShapeError if q and k differ in n_tokens or head_dim, or share
///         memory.
void ApplyRopeQK(const HeadsView& q, const HeadsView& k, std::span<const int64_t> position_ids,
                 const RopeOnTheFly& freqs, RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

/// Convenience: rotates x in place by position ids through a cache (grown to cover them).
/// Shapes: x [n_tokens, n_heads, head_dim]; position_ids [n_tokens], tokens, >= 0.
/// Errors: as ApplyRope; RangeError naming the position if one is negative.
void ApplyRope(const HeadsView& x, std::span<const int64_t> position_ids, RopeCache& cache, RopeLayout layout,
               RopeDirection direction = RopeDirection::kForward);

}  // namespace posenc
