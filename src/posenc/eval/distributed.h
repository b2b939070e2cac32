// `posenc eval` across ranks: the NLL of a row computed data-parallel (whole windows dealt to the ranks) or
// context-parallel (every window split over the ranks, Ring Attention), and the start-up check that every rank
// evaluates the same thing.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/attention/context_split.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/dist/communicator.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"

namespace posenc {

struct EvalOptions;  // eval/evaluate.h

/// What context-parallel eval did on this rank, summed over the windows it ran.
struct ContextParallelStats {
  int64_t windows = 0;  // windows run (each by all ranks together)
  RingStats ring;       // ring attention, every layer of every window (bytes_sent: K/V bytes this rank sent)
  double seconds = 0;   // wall time of those windows on this rank, forward + NLL + gather
};

/// WindowedNll of one row with the windows dealt to the ranks of `comm` (RunDataParallelBatch: every window
/// costs the same, so rank r gets windows r, r + N, ...): each rank runs its windows with NllOfWindows on
/// `threads` threads, rank 0 gathers them in window order. Collective.
/// Returns: on rank 0, nll [n_pred], bit-identical to WindowedNll in one process (each window is computed by
///          the same code whatever process runs it); on the other ranks, an empty vector.
/// Errors:  as WindowedNll (ValidateWindows first, on every rank alike); DistError from the communicator.
/// Progress: on_window(done, n_pred / ctx) on each rank for its own windows, if set.
std::vector<double> DataParallelNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                    const MethodRope& rope, int threads, Communicator& comm,
                                    const std::function<void(int64_t, int64_t)>& on_window = {});

/// WindowedNll of one row with every window computed by all ranks of `comm` together: positions dealt by
/// MakeContextSplit(ctx, N, split) (zigzag balances causal work), Transformer::ForwardHiddenContextParallel
/// (global positions for RoPE and the causal mask), then each rank scores its own positions (logits and
/// TokenNll) and rank 0 gathers them into window order. Windows run one after the other. Collective.
/// Returns: on rank 0, nll [n_pred], equal to WindowedNll up to the float32 rounding of attention (the ring merges
///          key blocks in another order; RingCausalAttention states the bound); elsewhere an empty vector.
/// Threads: the ring runs on the calling thread (one rank per core); `threads` of RunEval does not apply.
/// Errors:  as ValidateWindows; RangeError if ctx < N (a window shorter than the ranks); as
///          ForwardHiddenContextParallel and TokenNll (NumericError prefixed with the window); DistError from
///          the communicator or if a gathered message has the wrong length.
/// stats:   if set, this rank's counts and times (added to what it holds).
/// Progress: on_window(done, n_pred / ctx) after each window, if set.
std::vector<double> ContextParallelNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                       const MethodRope& rope, ContextSplitKind split, Communicator& comm,
                                       ContextParallelStats* stats = nullptr,
                                       const std::function<void(int64_t, int64_t)>& on_window = {});

/// Fingerprints (dist/fingerprint.h) of everything that decides what RunEval computes, a part each so a
/// disagreement can be named.
struct EvalInputsFingerprint {
  uint64_t options = 0;    // ctx, methods, n_pred, L0, weights, method options, reuse, context parallelism
  uint64_t model = 0;      // the model file's bytes, or a folder's regular files (names and bytes, sorted)
  uint64_t tokenizer = 0;  // the tokenizer file's bytes (0 when the model's own is used)
  uint64_t text = 0;       // the text file's bytes
};

/// The fingerprints of `options` with the training length L0 the run uses (`train_ctx`: the file's, or the
/// --train-ctx override, so equal values given two ways agree). Paths enter only through what they hold: the
/// same file named two ways (relative, absolute, through a symlink) has one fingerprint. threads, on_loaded and
/// comm are left out (they change no result).
/// Errors: IoError naming a path that cannot be read.
EvalInputsFingerprint FingerprintEvalInputs(const EvalOptions& options, int64_t train_ctx);

}  // namespace posenc
