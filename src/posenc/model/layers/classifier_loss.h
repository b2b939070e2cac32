// The classifier (final projection to vocabulary logits) fused with the softmax cross-entropy loss, forward
// beside backward (llm.c's matmul + softmax + crossentropy forward and its fused backward).
//
// Legend (row-major, innermost last):
//   n           rows: tokens, batch * ctx flattened
//   dim         channels of the normalised final hidden state
//   vocab_size  classes (logits per row)
// targets[r] is the id the row should predict (the next token), or kIgnoreTarget (-1): no loss at that row.
// Loss = mean over rows with a target of  -log softmax(logits_r)[targets[r]] = lse_r - logits_r[targets[r]],
// lse_r = log sum_v exp(logits_r[v]) (computed after subtracting the row maximum: numerically stable).
//
// Gradients accumulate (+=) into dx and dw; the caller zeroes them first. Types: float (sgemm; the softmax rows
// in the Highway kernels of posenc/kernels/train_kernels.h: exp within 1 ulp, the normaliser summed in float64)
// and float64 (dgemm, std::exp). Threads: rows in one piece per thread (layers/parallel.h); the products split as
// linear.h's; the mean is summed in float64 in row order. Results do not depend on the thread count.
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

/// Target id meaning "no target here" (ignored by the loss, like PyTorch's ignore_index).
inline constexpr int32_t kIgnoreTarget = -1;

/// logits = x W^T, then the mean cross-entropy over rows with a target. Saves logits and lse for the backward.
///
/// Shapes:  x [n, dim]; w [vocab_size, dim] (the classifier; the token embedding table when tied); targets [n];
///          logits [n, vocab_size] (overwritten); lse [n] (overwritten; natural log).
/// Returns: the mean loss in nats, accumulated in float64 (row terms lse_r - logit in float64, summed in row
///          order).
/// Errors:  RangeError naming the index and value if a target is outside [0, vocab_size) and not -1, or if
///          every target is -1 (the mean over no rows is undefined); ShapeError for sizes < 1 (n may be 0 only
///          with no targets: an error) or null pointers.
/// Source:  llm.c `crossentropy_forward` / `softmax_forward`; PyTorch `F.cross_entropy(reduction='mean',
///          ignore_index=-1)`.
template <typename T>
double ClassifierLossForward(const T* x, const T* w, std::span<const int32_t> targets, int64_t dim,
                             int64_t vocab_size, T* logits, T* lse);

/// Gradients of ClassifierLossForward times dloss (1 for the loss itself):
///   dlogits_r = (softmax(logits_r) - onehot(targets[r])) * dloss / n_targets   (0 for ignored rows),
///   dx += dlogits W,   dw += dlogits^T x.
///
/// Shapes:  as the forward; logits and lse are the forward's. logits is OVERWRITTEN with dlogits (it is the
///          forward's scratch; llm.c's fused classifier does the same); dx [n, dim] +=; dw [vocab_size, dim] +=.
/// Errors:  as the forward; ConfigError if dloss is not finite.
/// Source:  llm.c `crossentropy_softmax_backward` + `matmul_backward`.
template <typename T>
void ClassifierLossBackward(const T* x, const T* w, std::span<const int32_t> targets, int64_t dim,
                            int64_t vocab_size, const T* lse, double dloss, T* logits, T* dx, T* dw);

}  // namespace posenc
