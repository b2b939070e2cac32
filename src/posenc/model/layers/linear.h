// Linear layer (a matrix product plus an optional bias), forward beside backward as llm.c's matmul_forward /
// matmul_backward. Used for q/k/v (fused), the attention output projection and the feed-forward products.
//
// Legend (row-major, innermost last):
//   n    rows: tokens, batch * ctx flattened (llm.c's B*T)
//   in   input channels of a row
//   out  output channels of a row
// Weights are stored [out, in] as llama2.c, GGUF and HF store them (y = x W^T + b).
//
// Gradients accumulate (+=) into dx, dw and db, and the caller zeroes them first (llm.c's gpt2_zero_grad):
// a weight used twice (tied embeddings) or a micro-batch loop then just adds.
//
// Types: float (OpenBLAS sgemm; the training path) and float64 (dgemm; the gradient checks run the whole
// model in float64). Threads: the products are cut into fixed-size blocks (256 rows of y and dx; 32 rows of dw,
// each summed over all n rows in one BLAS call) spread over the threads (layers/parallel.h), with BLAS itself on one thread;
// the bias gradient is summed in float64 over fixed row blocks (layers::ReduceRowBlocks). Every element is thus
// computed by the same calls in the same order whatever the thread count (OpenBLAS's result depends on a call's
// shape, so the blocks must not follow the thread count): results do not depend on the thread count.
#pragma once

#include <cstdint>

namespace posenc {

/// Whether a forward writes its output or adds to it.
enum class OutputMode {
  kOverwrite,   // y = f(x)
  kAccumulate,  // y += f(x) (a residual connection: the layer's output added to the stream it came from)
};

/// y = x W^T + b.
///
/// Shapes:  x [n, in]; w [out, in]; b [out] or nullptr (no bias); y [n, out]. Contiguous, row-major. y must
///          not overlap x, w or b.
/// Layout:  mode kOverwrite writes y (old contents ignored, NaN included); kAccumulate adds to it.
/// Errors:  ShapeError if n, in or out is negative, or x, w or y is null while n * out > 0.
/// Source:  llm.c `matmul_forward`.
template <typename T>
void LinearForward(const T* x, const T* w, const T* b, int64_t n, int64_t in, int64_t out, T* y,
                   OutputMode mode = OutputMode::kOverwrite);

/// Gradients of LinearForward: dx += dy W, dw += dy^T x, db += sum over rows of dy.
///
/// Shapes:  dy [n, out]; x [n, in]; w [out, in]; dx [n, in] or nullptr (not wanted); dw [out, in];
///          db [out] or nullptr (no bias). Outputs must not overlap the inputs or each other.
/// Layout:  accumulates into dx, dw, db (+=); the caller zeroes them.
/// Errors:  ShapeError if a size is negative or a needed pointer (dy, x, w, dw) is null while n > 0.
/// Precision: db is summed in float64 (fixed row blocks, then block order) and rounded once.
/// Source:  llm.c `matmul_backward`.
template <typename T>
void LinearBackward(const T* dy, const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* dx, T* dw, T* db);

}  // namespace posenc
