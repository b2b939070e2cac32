// Token embedding, forward beside backward (the wte half of llm.c's encoder_forward / encoder_backward).
//
// Legend (row-major, innermost last):
//   n           rows: tokens, batch * ctx flattened
//   vocab_size  rows of the embedding table
//   dim         channels of a row (the model width)
//
// The backward scatter-adds (+=) into the table gradient: repeated tokens accumulate in token order, and the
// caller zeroes the gradient first. Types: float (the row kernels of posenc/kernels/pe_kernels.h, shared with
// the learned positional table: Highway SIMD, OpenMP threads for large calls, exact float32 additions in
// token order, so the result does not depend on the thread count) and float64 (plain loops).
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

/// out[r, :] = table[tokens[r], :].
/// Shapes:  tokens [n]; table [vocab_size, dim]; out [n, dim] (overwritten; must not overlap the table).
/// Errors:  RangeError naming the index and the id if a token is outside [0, vocab_size) (nothing written);
///          ShapeError if vocab_size or dim < 1, or a pointer is null while n > 0.
/// Source:  llm.c `encoder_forward` (wte); llama2.c run.c `forward` (token_embedding_table row copy).
template <typename T>
void EmbeddingForward(std::span<const int32_t> tokens, const T* table, int64_t vocab_size, int64_t dim, T* out);

/// dtable[tokens[r], :] += dout[r, :] for every r (scatter-add).
/// Shapes:  tokens [n]; dout [n, dim]; dtable [vocab_size, dim] +=.
/// Errors:  as EmbeddingForward (dtable is untouched when it throws).
/// Source:  llm.c `encoder_backward` (dwte).
template <typename T>
void EmbeddingBackward(std::span<const int32_t> tokens, const T* dout, int64_t vocab_size, int64_t dim, T* dtable);

}  // namespace posenc
