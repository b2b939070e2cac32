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
/// head_stride = seq*dim) are both expressible, as are q/k slices of a packed qkv buffer.
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

/// Rotates x in place: token t uses row rows[t] of `table`.
///
/// Shapes:  x [n_tokens, n_heads, head_dim] (strided, see HeadsView); rows [n_tokens] (for a RopeCache,
///          row = position id; for ComputeCosSin(positions), row = token index); table [n_rows, half].
/// Layout:  channels [0, 2*half) are rotated in `layout`; channels [2*half, head_dim) (partial rotary) are
///          not touched, so they stay bit-identical. bfloat16/float16 elements are widened to float32, rotated
///          in float32 and rounded to nearest even once.
/// Errors:  ShapeError if 2*half > head_dim, half < 1, a stride is smaller than the extent it skips, or
///          data is null with n_tokens*n_heads > 0; RangeError naming the token and row if a row is outside
///          [0, n_rows).
/// Source:  Su et al. 2021 (RoFormer) Sec. 3.4.2, eq. 34; HF `apply_rotary_pos_emb` (half-split),
///          GPT-J `rotate_every_two` (interleaved).
void ApplyRope(const HeadsView& x, std::span<const int64_t> rows, const CosSinView& table, RopeLayout layout,
               RopeDirection direction = RopeDirection::kForward);

/// Out-of-place ApplyRope: out = rotate(in). `in` and `out` have the same shape and dtype (strides may
/// differ); partial-rotary channels are copied bit-identically. They must not overlap unless they are the
/// same view (then it is the in-place call).
/// Errors: as ApplyRope, plus ShapeError if the shapes or dtypes differ.
void ApplyRope(const HeadsView& in, const HeadsView& out, std::span<const int64_t> rows,
               const CosSinView& table, RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

/// Q and K in one call, in place: both use the same rows (one position per token); n_heads may differ (GQA).
/// Errors: as ApplyRope, plus ShapeError if q and k differ in n_tokens or head_dim.
void ApplyRopeQK(const HeadsView& q, const HeadsView& k, std::span<const int64_t> rows, const CosSinView& table,
                 RopeLayout layout, RopeDirection direction = RopeDirection::kForward);

}  // namespace posenc

namespace posenc {

/// Convenience: rotates x in place by position ids through a cache (grown to cover them).
/// Shapes: x [n_tokens, n_heads, head_dim]; position_ids [n_tokens], tokens, >= 0.
/// Errors: as ApplyRope; RangeError naming the position if one is negative.
void ApplyRope(const HeadsView& x, std::span<const int64_t> position_ids, RopeCache& cache, RopeLayout layout,
               RopeDirection direction = RopeDirection::kForward);

}  // namespace posenc
