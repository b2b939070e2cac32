#include "posenc/eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/core/errors.h"
#include "posenc/core/threads.h"
#include "posenc/eval/uncertainty.h"
#include "posenc/eval/window_loop.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/log_sum_exp_kernels.h"

namespace posenc {
namespace {

constexpr int64_t kLogitRows = 256;  // positions whose logits are formed at once (see WindowedNll)

// One window: ForwardHidden on `input` at `positions`, then the NLL of input position score_from + j predicting
// targets[j], logits formed kLogitRows rows at a time (one [kLogitRows, vocab] buffer per thread, reused: a whole
// window's [L, vocab] would be 128 MiB per thread at L = 1024 and vocab 32000), one sgemm per chunk.
// `logits` holds at least min(n_scored, kLogitRows) * vocab floats. NumericError names the prediction's position.
void ScoreWindow(const Transformer& model, std::span<const int> input, std::span<const int64_t> positions,
                 const ForwardRope& frope, int64_t score_from, std::span<const int> targets, ForwardState& state,
                 std::vector<float>& logits, std::span<double> out,
                 const std::function<void(int64_t j, const float* logits)>& on_scored = {}) {
  const int64_t n_scored = static_cast<int64_t>(targets.size());
  const int64_t vocab = model.config().vocab_size;
  const int64_t dim = model.config().dim;
  model.ForwardHidden(input, positions.first(input.size()), frope, state);
  int64_t t = -1;  // the prediction being scored
  try {
    for (int64_t j0 = 0; j0 < n_scored; j0 += kLogitRows) {
      const int64_t rows = std::min(kLogitRows, n_scored - j0);
      const int64_t t0 = score_from + j0;
      model.Logits(state.xb.data() + t0 * dim, rows, t0, logits.data());
      for (int64_t j = j0; j < j0 + rows; ++j) {
        t = score_from + j;
        out[static_cast<size_t>(j)] = TokenNll(logits.data() + (j - j0) * vocab, vocab, targets[static_cast<size_t>(j)]);
        if (on_scored) on_scored(j, logits.data() + (j - j0) * vocab);
      }
      t = -1;
    }
  } catch (const NumericError& e) {
    throw NumericError(t >= 0 ? fmt::format("prediction at position {}: {}", t, e.what()) : std::string(e.what()));
  }
}


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
  ForEachWindow(n_windows, n_threads, std::min<int64_t>(L, kLogitRows) * vocab, on_window,
                [&](int64_t i, ForwardState& state, std::vector<float>& logits) {
                  const int64_t w = windows[static_cast<size_t>(i)];
                  const std::span<const int> in = tokens.subspan(static_cast<size_t>(w * L), static_cast<size_t>(L));
                  try {
                    ScoreWindow(model, in, positions, frope, 0,
                                tokens.subspan(static_cast<size_t>(w * L + 1), static_cast<size_t>(L)), state, logits,
                                std::span<double>(nll).subspan(static_cast<size_t>(i * L), static_cast<size_t>(L)));
                  } catch (const NumericError& e) {  // where in the token stream (Forward names the in-window part)
                    throw NumericError(fmt::format("window {} (tokens [{}, {})): {}", w, w * L, w * L + L, e.what()));
                  }
                });
  return nll;
}

std::vector<std::vector<double>> NllOfProtocolWindows(const Transformer& model, const ProtocolPlan& plan,
                                                      const MethodRope& rope, int threads,
                                                      const std::function<void(int64_t, int64_t)>& on_window,
                                                      const std::function<void(int64_t, const float*)>& on_scored) {
  const int64_t L = rope.ctx;
  const int64_t vocab = model.config().vocab_size;
  const int64_t n_windows = static_cast<int64_t>(plan.windows.size());
  int64_t longest_scored = 1;
  for (int64_t i = 0; i < n_windows; ++i) {
    const ProtocolWindow& w = plan.windows[static_cast<size_t>(i)];
    const int64_t n = static_cast<int64_t>(w.input.size());
    if (n > L || n < 1) {
      throw ConfigError(fmt::format("window {} holds {} tokens; the method's tables are for 1..{}", i, n, L));
    }
    if (w.score_from < 0 || w.score_from + static_cast<int64_t>(w.targets.size()) > n) {
      throw RangeError(fmt::format("window {}: scored positions [{}, {}) outside its {} tokens", i, w.score_from,
                                   w.score_from + static_cast<int64_t>(w.targets.size()), n));
    }
    for (const std::vector<int>* ids : {&w.input, &w.targets}) {
      for (int id : *ids) {
        if (id < 0 || id >= vocab) {
          throw RangeError(fmt::format("window {}: token id must be in [0, vocab_size={}), got {}", i, vocab, id));
        }
      }
    }
    longest_scored = std::max<int64_t>(longest_scored, static_cast<int64_t>(w.targets.size()));
  }
  const int n_threads = ResolveThreads(threads, "threads");
  std::vector<int64_t> first_row(static_cast<size_t>(n_windows), 0);  // index of each window's first prediction
  for (int64_t i = 1; i < n_windows; ++i) {
    first_row[static_cast<size_t>(i)] =
        first_row[static_cast<size_t>(i - 1)] + static_cast<int64_t>(plan.windows[static_cast<size_t>(i - 1)].targets.size());
  }
  std::vector<std::vector<double>> nll(static_cast<size_t>(n_windows));
  const ForwardRope frope = rope.forward();
  std::vector<int64_t> positions(static_cast<size_t>(L));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  ForEachWindow(n_windows, n_threads, std::min(longest_scored, kLogitRows) * vocab, on_window,
                [&](int64_t i, ForwardState& state, std::vector<float>& logits) {
                  const ProtocolWindow& w = plan.windows[static_cast<size_t>(i)];
                  std::vector<double>& out = nll[static_cast<size_t>(i)];
                  out.resize(w.targets.size());
                  std::function<void(int64_t, const float*)> row_sink;
                  if (on_scored) {
                    const int64_t k0 = first_row[static_cast<size_t>(i)];
                    row_sink = [&on_scored, k0](int64_t j, const float* row) { on_scored(k0 + j, row); };
                  }
                  try {
                    ScoreWindow(model, w.input, positions, frope, w.score_from, w.targets, state, logits, out,
                                row_sink);
                  } catch (const NumericError& e) {
                    throw NumericError(fmt::format("window {} of {}: {}", i, EvalProtocolName(plan.protocol), e.what()));
                  }
                });
  return nll;
}

PerplexityResult SummarizeNll(std::span<const double> nll, int64_t ctx, int64_t l0) {
  const int64_t n = static_cast<int64_t>(nll.size());
  if (n == 0 || ctx < 1 || n % ctx != 0) {
    throw ConfigError(fmt::format("SummarizeNll: {} predictions must be a positive multiple of ctx = {}", n, ctx));
  }
  // posenc's layout: window w scores positions 0..ctx-1 (its tokens are not needed by the summary).
  ProtocolPlan plan;
  plan.protocol = EvalProtocol::kPosenc;
  plan.ctx = ctx;
  plan.n_parts = n / ctx;
  std::vector<std::vector<double>> per_window(static_cast<size_t>(n / ctx));
  for (int64_t w = 0; w < n / ctx; ++w) {
    ProtocolWindow win;
    win.unit = w;
    win.targets.resize(static_cast<size_t>(ctx));
    plan.windows.push_back(std::move(win));
    plan.part_source.push_back(w);
    per_window[static_cast<size_t>(w)].assign(nll.begin() + w * ctx, nll.begin() + (w + 1) * ctx);
  }
  plan.n_scored = n;
  return SummarizeProtocol(plan, per_window, l0);
}

PerplexityResult SummarizeProtocol(const ProtocolPlan& plan, const std::vector<std::vector<double>>& nll,
                                   int64_t l0) {
  if (nll.size() != plan.windows.size()) {
    throw ShapeError(fmt::format("SummarizeProtocol: NLLs of {} windows for a plan of {}", nll.size(),
                                 plan.windows.size()));
  }
  const std::vector<PositionBucket> edges = PositionBuckets(plan.ctx, l0);
  std::vector<double> bucket_sum(edges.size(), 0.0);
  std::vector<int64_t> bucket_count(edges.size(), 0);
  std::vector<PartResult> parts(static_cast<size_t>(plan.n_parts));
  std::vector<double> part_sum(parts.size(), 0.0), part_window_means(parts.size(), 0.0);
  std::vector<int64_t> part_windows(parts.size(), 0);
  const bool by_windows = plan.protocol == EvalProtocol::kTruncate ||
                          (plan.protocol == EvalProtocol::kSliding && plan.average == WindowAverage::kWindows);
  const bool token_units = plan.protocol == EvalProtocol::kLlamaPerplexity;
  PerplexityResult r;
  double total = 0.0, window_means = 0.0;
  for (size_t i = 0; i < plan.windows.size(); ++i) {
    const ProtocolWindow& w = plan.windows[i];
    if (nll[i].size() != w.targets.size()) {
      throw ShapeError(fmt::format("SummarizeProtocol: window {} has {} NLLs for {} targets", i, nll[i].size(),
                                   w.targets.size()));
    }
    if (w.unit < 0 || w.unit >= plan.n_parts) {
      throw ShapeError(fmt::format("SummarizeProtocol: window {} belongs to part {} of {}", i, w.unit, plan.n_parts));
    }
    double sum = 0.0;
    for (size_t j = 0; j < nll[i].size(); ++j) {
      const double v = nll[i][j];
      sum += v;
      total += v;  // token order, one accumulator (posenc's ppl keeps the bits of a flat sum)
      const int64_t pos = w.score_from + static_cast<int64_t>(j);
      for (size_t b = 0; b < edges.size(); ++b) {
        if (pos >= edges[b].from && pos < edges[b].to) {
          bucket_sum[b] += v;
          ++bucket_count[b];
          break;
        }
      }
      if (token_units) r.unit_nll.push_back(v);
    }
    r.count += static_cast<int64_t>(nll[i].size());
    if (!nll[i].empty()) window_means += sum / static_cast<double>(nll[i].size());
    const size_t p = static_cast<size_t>(w.unit);
    part_sum[p] += sum;
    parts[p].count += static_cast<int64_t>(nll[i].size());
    if (!nll[i].empty()) {
      part_window_means[p] += sum / static_cast<double>(nll[i].size());
      ++part_windows[p];
    }
  }
  if (r.count == 0) throw ConfigError("SummarizeProtocol: no position is scored");
  int64_t n_windows = 0;
  for (int64_t c : part_windows) n_windows += c;
  r.mean_nll = by_windows ? window_means / static_cast<double>(n_windows) : total / static_cast<double>(r.count);
  r.ppl = std::exp(r.mean_nll);
  double running = 0.0;
  int64_t running_count = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    PartResult& part = parts[p];
    part.index = p < plan.part_source.size() ? plan.part_source[p] : static_cast<int64_t>(p);
    if (part.count == 0) continue;
    part.mean_nll = by_windows ? part_window_means[p] / static_cast<double>(part_windows[p])
                               : part_sum[p] / static_cast<double>(part.count);
    running += part_sum[p];
    running_count += part.count;
    if (plan.protocol == EvalProtocol::kLlamaPerplexity) {
      part.running_ppl = std::exp(running / static_cast<double>(running_count));
    }
    if (!token_units) r.unit_nll.push_back(part.mean_nll);
  }
  r.parts = std::move(parts);
  const MeanEstimate e = EstimateMean(r.unit_nll, r.mean_nll);
  r.n_units = e.n;
  r.nll_se = e.se;
  r.nll_ci95 = e.ci95;
  for (size_t b = 0; b < edges.size(); ++b) {
    if (bucket_count[b] == 0) continue;
    const double mean = bucket_sum[b] / static_cast<double>(bucket_count[b]);
    r.buckets.push_back({edges[b].from, edges[b].to, bucket_count[b], mean, std::exp(mean)});
  }
  return r;
}

}  // namespace posenc
