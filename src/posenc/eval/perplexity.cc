#include "posenc/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <numeric>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/log_sum_exp_kernels.h"

namespace posenc {
namespace {

constexpr int64_t kLogitRows = 256;  // positions whose logits are formed at once (see WindowedNll)

}  // namespace

double TokenNll(const float* logits, int64_t vocab_size, int target) {
  if (target < 0 || target >= vocab_size) {
    throw RangeError(fmt::format("target token must be in [0, vocab_size={}), got {}", vocab_size, target));
  }
  if (const int64_t bad = kernels::FirstNonFinite(logits, vocab_size); bad >= 0) {
    throw NumericError(fmt::format("logits[{}] is {}: no negative log-likelihood can be formed", bad, logits[bad]));
  }
  const double nll = kernels::LogSumExp(logits, vocab_size) - static_cast<double>(logits[target]);
  if (!std::isfinite(nll)) throw NumericError(fmt::format("negative log-likelihood is {}", nll));
  return nll;
}

std::vector<double> WindowedNll(const Transformer& model, std::span<const int> tokens, int64_t n_pred,
                                const MethodRope& rope, int threads,
                                const std::function<void(int64_t, int64_t)>& on_window) {
  const int64_t ctxs[1] = {rope.ctx};
  ValidateWindows(static_cast<int64_t>(tokens.size()), n_pred, ctxs);
  std::vector<int64_t> windows(static_cast<size_t>(n_pred / rope.ctx));
  std::iota(windows.begin(), windows.end(), int64_t{0});
  return NllOfWindows(model, tokens, windows, rope, threads, on_window);
}

std::vector<double> NllOfWindows(const Transformer& model, std::span<const int> tokens,
                                 std::span<const int64_t> windows, const MethodRope& rope, int threads,
                                 const std::function<void(int64_t, int64_t)>& on_window) {
  const int64_t L = rope.ctx;
  if (L < 1) throw ConfigError(fmt::format("window length (ctx) must be >= 1, got {}", L));
  const int64_t n_windows = static_cast<int64_t>(windows.size());
  const int64_t n_tokens = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n_windows; ++i) {
    const int64_t w = windows[static_cast<size_t>(i)];
    if (w < 0 || w + 1 > (n_tokens - 1) / L) {  // window w reads tokens [w L, (w + 1) L] (inputs and targets)
      throw RangeError(fmt::format("window {} of {} tokens needs tokens [{}, {}], the stream has {}", w, L, w * L,
                                   (w + 1) * L, n_tokens));
    }
  }
  const int64_t vocab = model.config().vocab_size;
  for (int64_t i = 0; i < n_windows; ++i) {
    const int64_t w = windows[static_cast<size_t>(i)];
    for (int64_t j = w * L; j <= (w + 1) * L; ++j) {
      if (tokens[static_cast<size_t>(j)] < 0 || tokens[static_cast<size_t>(j)] >= vocab) {
        throw RangeError(fmt::format("token id at index {} must be in [0, vocab_size={}), got {}", j, vocab,
                                     tokens[static_cast<size_t>(j)]));
      }
    }
  }
  const int n_threads = ResolveThreads(threads, "threads");
  std::vector<double> nll(static_cast<size_t>(n_windows * L));
  const ForwardRope frope = rope.forward();
  std::vector<int64_t> positions(static_cast<size_t>(L));
  std::iota(positions.begin(), positions.end(), int64_t{0});  // positions restart at 0 in every window
  std::exception_ptr error;
  std::mutex mu;
  int64_t done = 0;
#pragma omp parallel num_threads(n_threads)
  {
    ForwardState state;
    // Logits of kLogitRows positions at a time: one [kLogitRows, vocab] buffer per thread, reused (a whole
    // window's [L, vocab] would be 128 MiB per thread at L = 1024 and vocab 32000), still one sgemm per chunk.
    const int64_t chunk = std::min<int64_t>(L, kLogitRows);
    std::vector<float> logits(static_cast<size_t>(chunk * vocab));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n_windows; ++i) {
      const int64_t w = windows[static_cast<size_t>(i)];
      try {
        const std::span<const int> in = tokens.subspan(static_cast<size_t>(w * L), static_cast<size_t>(L));
        int64_t t = -1;  // -1 while in Forward, then the prediction being scored
        try {
          model.ForwardHidden(in, positions, frope, state);
          const int64_t dim = model.config().dim;
          for (int64_t t0 = 0; t0 < L; t0 += chunk) {
            const int64_t rows = std::min(chunk, L - t0);
            model.Logits(state.xb.data() + t0 * dim, rows, t0, logits.data());
            for (t = t0; t < t0 + rows; ++t) {
              nll[static_cast<size_t>(i * L + t)] = TokenNll(logits.data() + (t - t0) * vocab, vocab,
                                                              tokens[static_cast<size_t>(w * L + t + 1)]);
            }
            t = -1;
          }
        } catch (const NumericError& e) {  // add where in the token stream (Forward names the in-window part)
          throw NumericError(fmt::format("window {} (tokens [{}, {})){}: {}", w, w * L, w * L + L,
                                         t >= 0 ? fmt::format(", prediction at position {}", t) : "", e.what()));
        }
        std::lock_guard<std::mutex> lock(mu);
        ++done;
        if (on_window) on_window(done, n_windows);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
  return nll;
}

PerplexityResult SummarizeNll(std::span<const double> nll, int64_t ctx, int64_t l0) {
  const int64_t n = static_cast<int64_t>(nll.size());
  if (n == 0 || ctx < 1 || n % ctx != 0) {
    throw ConfigError(fmt::format("SummarizeNll: {} predictions must be a positive multiple of ctx = {}", n, ctx));
  }
  PerplexityResult r;
  r.count = n;
  double total = 0.0;
  for (double v : nll) total += v;
  r.mean_nll = total / static_cast<double>(n);
  r.ppl = std::exp(r.mean_nll);
  for (const PositionBucket& b : PositionBuckets(ctx, l0)) {
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t w = 0; w < n / ctx; ++w) {
      for (int64_t t = b.from; t < b.to; ++t) sum += nll[static_cast<size_t>(w * ctx + t)];
      count += b.to - b.from;
    }
    const double mean = sum / static_cast<double>(count);
    r.buckets.push_back({b.from, b.to, count, mean, std::exp(mean)});
  }
  return r;
}

}  // namespace posenc
