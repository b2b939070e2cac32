// Google Benchmark for causal attention on stories260K's shapes (8 query heads, 4 KV heads, head_dim 8) and
// for one window forward pass of the bundled model, one thread. Each attention case is checked once against a
// float64 reference before its first timing; the forward pass is checked to give finite logits.
//
//   build/posenc_bench --benchmark_filter='attention|forward' --benchmark_min_time=1
//
// items_per_second counts (query head, key) pairs for attention (n_heads * n (n + 1) / 2 per call) and
// tokens for the forward pass. Eval throughput against the oracle is bench/eval_vs_oracle.sh.
#include <benchmark/benchmark.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/blas/gemm.h"
#include "posenc/eval/data_files.h"
#include "posenc/eval/methods.h"
#include "posenc/model/transformer.h"

namespace posenc::bench {
namespace {

constexpr int64_t kHeads = 8, kKvHeads = 4, kHd = 8;

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// Largest |out - reference| for query rows {0, n/2, n-1}, reference in float64 from the definition.
double MaxError(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                const std::vector<float>& out, int64_t n) {
  double worst = 0.0;
  for (int64_t i : {int64_t{0}, n / 2, n - 1}) {
    for (int64_t h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      std::vector<double> s(static_cast<size_t>(i + 1));
      double m = -1e300, sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < kHd; ++d) dot += double(q[(i * kHeads + h) * kHd + d]) * k[(j * kKvHeads + g) * kHd + d];
        s[j] = dot / std::sqrt(double(kHd));
        m = std::max(m, s[j]);
      }
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t d = 0; d < kHd; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j <= i; ++j) acc += s[j] * v[(j * kKvHeads + g) * kHd + d];
        worst = std::max(worst, std::fabs(acc / sum - out[(i * kHeads + h) * kHd + d]));
      }
    }
  }
  return worst;
}

void BM_CausalAttention(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> q = Random(n * kHeads * kHd, 1), k = Random(n * kKvHeads * kHd, 2),
                           v = Random(n * kKvHeads * kHd, 3);
  std::vector<float> out(q.size());
  AttentionScratch scratch;
  const AttentionDims dims{kHeads, kKvHeads, kHd};
  const AttentionInputs in{q.data(), n, kHeads * kHd, 0, k.data(), v.data(), n, kKvHeads * kHd};
  CausalAttention(dims, in, 1.0f, out.data(), kHeads * kHd, scratch);
  if (const double err = MaxError(q, k, v, out, n); !(err < 1e-5)) {
    state.SkipWithError(("differs from the float64 reference by " + std::to_string(err)).c_str());
    return;
  }
  for (auto _ : state) {
    CausalAttention(dims, in, 1.0f, out.data(), kHeads * kHd, scratch);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kHeads * n * (n + 1) / 2);
}
BENCHMARK(BM_CausalAttention)->Name("attention/causal_8x4x8")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond);

void BM_Forward(benchmark::State& state, EvalMethod method) {
  // data/ next to the build directory (build/posenc_bench -> data/), as the CLI finds it.
  static const Transformer model(LoadCheckpoint(FindDataFile("stories260K.bin", DefaultDataDirs(""))));
  const int64_t n = state.range(0);
  SetBlasThreads(1);
  const MethodRope rope = BuildMethodRope(method, n, model.config());
  std::vector<int> tokens(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) tokens[t] = static_cast<int>(3 + (t * 7919) % 509);
  ForwardState fs;
  std::vector<float> logits(static_cast<size_t>(n * model.config().vocab_size));
  model.Forward(tokens, rope.forward(), fs, logits.data());
  for (float x : logits) {
    if (!std::isfinite(x)) {
      state.SkipWithError("non-finite logits");
      return;
    }
  }
  for (auto _ : state) {
    model.Forward(tokens, rope.forward(), fs, logits.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Forward, none, EvalMethod::kNone)
    ->Name("forward/stories260K_none")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Forward, dynamic, EvalMethod::kDynamic)
    ->Name("forward/stories260K_dynamic")->Arg(2048)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace posenc::bench
