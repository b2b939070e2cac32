// Absolute positional encodings added to the token embeddings, forward beside backward: a sinusoidal table
// (fixed: Vaswani et al. 2017, Sec. 3.5) or a learned one (trained: GPT-2's wpe). Token t of every sequence sits
// at position t (positions restart at 0 in each sequence of the batch).
//
// Legend (row-major, innermost last):
//   batch       sequences; ctx  tokens per sequence (positions 0 .. ctx-1)
//   table_rows  rows of the position table (max_seq_len; >= ctx)
//   dim         channels of a row (the model width)
//
// Types: float goes through posenc/pe/learned.h (the row kernels: exact float32 additions, bit-identical on
// every SIMD target and thread count); float64 runs plain loops. The backward scatter-adds (+=) into the table
// gradient; the caller zeroes it first. A sinusoidal table has no gradient: it is the same forward with a fixed
// table (pe/sinusoidal.h SinusoidalTable over positions [0, table_rows)).
#pragma once

#include <cstdint>

namespace posenc {

/// x[b, t, :] += table[t, :] for b < batch, t < ctx.
/// Shapes:  table [table_rows, dim]; x [batch, ctx, dim], modified in place.
/// Errors:  RangeError if ctx > table_rows (names both: a learned table has no row past its last position);
///          ShapeError if a size is < 0 (dim, table_rows < 1) or a pointer is null while batch * ctx > 0.
/// Source:  llm.c `encoder_forward` (the wpe half); Vaswani et al. 2017, Sec. 3.5 ("we add positional
///          encodings to the input embeddings").
template <typename T>
void PositionTableForward(const T* table, int64_t table_rows, int64_t dim, int64_t batch, int64_t ctx, T* x);

/// dtable[t, :] += sum over b of dx[b, t, :] (sequences in order).
/// Shapes:  dx [batch, ctx, dim]; dtable [table_rows, dim] +=. Errors: as PositionTableForward.
/// Source:  llm.c `encoder_backward` (dwpe).
template <typename T>
void PositionTableBackward(const T* dx, int64_t table_rows, int64_t dim, int64_t batch, int64_t ctx, T* dtable);

}  // namespace posenc
