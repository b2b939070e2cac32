// Negative log-likelihood over eval windows, and perplexity overall and by position bucket.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/model/methods.h"
#include "posenc/eval/windows.h"
#include "posenc/model/transformer.h"

namespace posenc {

/// -log softmax(logits)[target] in nats, computed in double (max-subtracted log-sum-exp, kernels::LogSumExp).
/// Shapes: logits [vocab_size]. Errors: RangeError if target is outside [0, vocab_size); NumericError naming
/// the index if a logit is NaN or infinite (a NaN never becomes a perplexity).
double TokenNll(const float* logits, int64_t vocab_size, int target);

/// NLL of every prediction (protocol step 2): window w of L = rope.ctx runs Forward on tokens[wL, wL+L)
/// (positions 0..L-1) and scores targets tokens[wL+1, wL+L+1). Windows run in parallel on `threads` OpenMP
/// threads (each with its own ForwardState); the result does not depend on the thread count.
///
/// Shapes:  tokens [>= n_pred + 1]; returns nll [n_pred], nll[wL + t] for window w, position t.
/// Errors:  as ValidateWindows (n_pred a multiple of rope.ctx, enough tokens); ConfigError if threads is outside
///          [0, kMaxThreads]; as Transformer::Forward; NumericError (from Forward or TokenNll) prefixed with the
///          window and its token range.
/// Progress: on_window(done, total) is called (serialised) after every finished window, if set.
std::vector<double> WindowedNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                const MethodRope& rope, int threads,
                                const std::function<void(int64_t, int64_t)>& on_window = {});

/// The NLL of some windows only: window w of L = rope.ctx (each entry of `windows`) runs Forward on tokens[wL,
/// wL+L) and scores tokens[wL+1, wL+L+1), exactly as WindowedNll computes that window (same code, one thread and
/// one ForwardState per window), so a window's NLL has the same bits whichever process, thread or batch of
/// windows computes it: the unit of data-parallel eval.
///
/// Shapes:  windows [n] (any order, may repeat); returns nll [n * L], nll[i L + t] for windows[i], position t.
/// Errors:  ConfigError if rope.ctx < 1 or threads is outside [0, kMaxThreads]; RangeError naming the window if it
///          needs tokens past the end, or a token id outside [0, vocab_size); as WindowedNll otherwise.
/// Progress: on_window(done, windows.size()) after every finished window, if set (serialised).
std::vector<double> NllOfWindows(const Transformer& model, std::span<const int> tokens,
                                 std::span<const int64_t> windows, const MethodRope& rope, int threads,
                                 const std::function<void(int64_t, int64_t)>& on_window = {});

/// ppl = exp(mean NLL) over a set of predictions.
struct BucketResult {
  int64_t from = 0;       // in-window positions [from, to), tokens
  int64_t to = 0;
  int64_t count = 0;      // predictions in the bucket
  double mean_nll = 0.0;  // nats
  double ppl = 0.0;
};

/// Perplexity of one (ctx, method) run.
struct PerplexityResult {
  int64_t count = 0;      // predictions (N)
  double mean_nll = 0.0;  // nats
  double ppl = 0.0;
  std::vector<BucketResult> buckets;  // PositionBuckets(ctx, l0)
};

/// Mean NLL and ppl overall and per PositionBuckets(ctx, l0) bucket of in-window positions (position of
/// prediction i is i % ctx). Sums in double. Errors: ConfigError if nll is empty or not a multiple of ctx.
PerplexityResult SummarizeNll(std::span<const double> nll, int64_t ctx, int64_t l0);

}  // namespace posenc
