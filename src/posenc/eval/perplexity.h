// Negative log-likelihood over eval windows, and perplexity overall and by position bucket.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/model/methods.h"
#include "posenc/eval/protocols.h"
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

/// The NLL of every scored position of a protocol's windows (ProtocolPlan): window i runs Forward on its input
/// (positions 0..n-1) and scores its targets; logits are formed only for the scored rows. Windows run in parallel
/// on `threads` OpenMP threads; the result does not depend on the thread count. A posenc window gives the same
/// bits as NllOfWindows.
/// Shapes:  returns nll[i][j] for window i, its j-th target.
/// Errors:  ConfigError if a window is longer than rope.ctx or threads is outside [0, kMaxThreads]; RangeError
///          naming the window if a token id is outside [0, vocab_size); as Forward; NumericError prefixed with the
///          window index.
/// Progress: on_window(done, windows) after every finished window, if set (serialised).
/// on_scored(k, logits [vocab]), if set, is called for every scored prediction k (in plan order: window by window,
/// targets in order) with its logits, from the thread computing the window (concurrently for different k).
std::vector<std::vector<double>> NllOfProtocolWindows(
    const Transformer& model, const ProtocolPlan& plan, const MethodRope& rope, int threads,
    const std::function<void(int64_t, int64_t)>& on_window = {},
    const std::function<void(int64_t k, const float* logits)>& on_scored = {});

/// ppl = exp(mean NLL) over a set of predictions.
struct BucketResult {
  int64_t from = 0;       // in-window positions [from, to), tokens
  int64_t to = 0;
  int64_t count = 0;      // predictions in the bucket
  double mean_nll = 0.0;  // nats
  double ppl = 0.0;
};

/// One part of a protocol's text (a window, document or chunk: PartKind) and its scored tokens.
struct PartResult {
  int64_t index = 0;      // the window / chunk index, or the document's index in the text
  int64_t count = 0;      // scored tokens
  double mean_nll = 0.0;  // nats, over its scored tokens (sliding, --average windows: mean of its windows' means)
  double running_ppl = 0.0;  // llama-perplexity: exp(mean NLL over chunks 0..this one), as llama.cpp prints
};

/// Perplexity of one (ctx, method) run.
struct PerplexityResult {
  int64_t count = 0;      // predictions scored
  double mean_nll = 0.0;  // nats: the protocol's estimate (ProtocolPlan)
  double ppl = 0.0;       // exp(mean_nll)
  std::vector<BucketResult> buckets;  // PositionBuckets(ctx, l0) that hold scored positions
  // Uncertainty over the protocol's independent units (UnitKind: windows, documents or tokens):
  int64_t n_units = 0;
  double nll_se = 0.0;                  // sample sd (n - 1) of the units' values / sqrt(n); NaN if n < 2
  std::array<double, 2> nll_ci95 = {};  // mean_nll -/+ t(0.975, n - 1) nll_se (ppl bounds: exp of these)
  std::vector<double> unit_nll;         // [n_units]: each unit's value (paired differences use them)
  std::vector<PartResult> parts;        // per window / document / chunk (PartKind)
};

/// Mean NLL and ppl overall and per PositionBuckets(ctx, l0) bucket of in-window positions (position of
/// prediction i is i % ctx), and the uncertainty with windows as units (posenc's protocol; parts = windows).
/// Sums in double. Errors: ConfigError if nll is empty or not a multiple of ctx.
PerplexityResult SummarizeNll(std::span<const double> nll, int64_t ctx, int64_t l0);

/// A protocol's perplexity from the NLLs of its windows (NllOfProtocolWindows; only each window's score_from,
/// target count and unit are read, not its tokens):
///   mean_nll  posenc, llama-perplexity, sliding with --average tokens: the mean over every scored token;
///             sliding with --average windows and truncate: the mean of the windows' mean NLLs (YaRN);
///   parts     per window / document / chunk (PartKind): scored tokens and mean NLL (sliding with --average
///             windows: the mean of the document's windows' means); llama-perplexity also running_ppl;
///   units     posenc: windows; sliding / truncate: documents (their parts' mean_nll); llama-perplexity: every
///             scored token (its SE is llama.cpp's +- / ppl: sqrt((mean(v^2) - mean(v)^2) / (n - 1)));
///             nll_se and nll_ci95 by EstimateMean(unit_nll, mean_nll);
///   buckets   PositionBuckets(ctx, l0) of the scored input positions, those holding any.
/// Sums in double, windows and tokens in order. Errors: ShapeError if nll does not have one entry of the right
/// length per window; ConfigError if nothing is scored.
PerplexityResult SummarizeProtocol(const ProtocolPlan& plan, const std::vector<std::vector<double>>& nll,
                                   int64_t l0);

}  // namespace posenc
