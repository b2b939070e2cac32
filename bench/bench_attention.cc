// Google Benchmark for causal attention on stories260K's shapes (8 query heads, 4 KV heads, head_dim 8) and
// for one window forward pass of the bundled model, one thread. Each attention case is checked once against a
// float64 reference before its first timing; the forward pass is checked to give finite logits.
//
//   build/posenc_gbench --benchmark_filter='attention|forward' --benchmark_min_time=1
//
// items_per_second counts (query head, key) pairs for attention (n_heads * n (n + 1) / 2 per call) and
// tokens for the forward pass. Eval throughput against the oracle is bench/eval_vs_oracle.sh.
//
// Tiled attention (FlashCausalAttention): attention/flash_8x4x8 on the same shapes as causal_8x4x8
// (no RoPE, same float64 check), and attention/flash_rope/<case> on the `posenc bench` shapes with RoPE inside the
// call, next to attention/row/<case> and attention/naive/<case> on pre-rotated inputs; counters report
// GFLOP/s (n_heads * 4 * head_dim * L (L + 1) / 2 per call). `posenc bench --filter attention` gives the same
// comparison with OpenBLAS sgemm measured in the same run.
#include <benchmark/benchmark.h>

#include <omp.h>

#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention_suite.h"
#include "posenc/attention/attention.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/blas/gemm.h"
#include "posenc/eval/data_files.h"
#include "posenc/model/methods.h"
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

// One attention implementation on stories260K's shapes: `run(dims, in, out)` computes the whole call. Checked
// once against the float64 reference, then timed.
template <class Run>
void TimeAttention(benchmark::State& state, Run run) {
  const int64_t n = state.range(0);
  const std::vector<float> q = Random(n * kHeads * kHd, 1), k = Random(n * kKvHeads * kHd, 2),
                           v = Random(n * kKvHeads * kHd, 3);
  std::vector<float> out(q.size());
  const AttentionDims dims{kHeads, kKvHeads, kHd};
  const AttentionInputs in{q.data(), n, kHeads * kHd, 0, k.data(), v.data(), n, kKvHeads * kHd};
  run(dims, in, out.data());
  if (const double err = MaxError(q, k, v, out, n); !(err < 1e-5)) {
    state.SkipWithError(("differs from the float64 reference by " + std::to_string(err)).c_str());
    return;
  }
  for (auto _ : state) {
    run(dims, in, out.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kHeads * n * (n + 1) / 2);
}

void BM_CausalAttention(benchmark::State& state) {
  AttentionScratch scratch;
  TimeAttention(state, [&](const AttentionDims& dims, const AttentionInputs& in, float* out) {
    CausalAttention(dims, in, 1.0f, out, kHeads * kHd, scratch);
  });
}
BENCHMARK(BM_CausalAttention)->Name("attention/causal_8x4x8")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond);

void BM_FlashAttention(benchmark::State& state) {
  FlashScratch scratch;
  TimeAttention(state, [&](const AttentionDims& dims, const AttentionInputs& in, float* out) {
    FlashCausalAttention(dims, in, {}, 1.0f, out, kHeads * kHd, scratch);
  });
}
BENCHMARK(BM_FlashAttention)->Name("attention/flash_8x4x8")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond);

// The `posenc bench` attention cases; which: 0 posenc (flash + RoPE), 1 row path, 2 naive L x L.
void BM_AttentionCase(benchmark::State& state, const AttentionCase& c, int which) {
  AttentionWorkload w(c);
  if (const double e = w.FlashErrorOverBound(); !(e <= 1.0)) {
    state.SkipWithError(("posenc exceeds the derived float64 bound: error / bound = " + std::to_string(e)).c_str());
    return;
  }
  for (auto _ : state) {
    if (which == 0) w.RunFlash();
    if (which == 1) w.RunRow();
    if (which == 2) w.RunNaive(1);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(AttentionFlops(c) * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

const bool kAttentionCasesRegistered = [] {
  for (const AttentionCase& c : DefaultAttentionCases()) {
    if (c.n_tokens > 2048) continue;  // the 8192 cases run in `posenc bench` only (a row-path call takes seconds)
    benchmark::RegisterBenchmark(("attention/flash_rope/" + c.name).c_str(), BM_AttentionCase, c, 0)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("attention/row/" + c.name).c_str(), BM_AttentionCase, c, 1)
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("attention/naive/" + c.name).c_str(), BM_AttentionCase, c, 2)
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

// Tile-size sweep behind FlashTiling's defaults: L = 2048, 8 query / 2 kv heads (kv_mul 2), head_dim range(2),
// RoPE in the call, one OpenMP thread; args (q_block, k_block). Read the CPU column (thread CPU time, immune to
// preemption on a shared machine) against attention/sgemm_2048_1thread.
void BM_FlashTiling(benchmark::State& state) {
  const AttentionCase c{"tiling", 2048, 8, 2, state.range(2), state.range(2), RopeLayout::kHalfSplit};
  AttentionWorkload w(c, FlashTiling{state.range(0), state.range(1)});
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  if (const double e = w.FlashErrorOverBound(); !(e <= 1.0)) {
    omp_set_num_threads(saved);
    state.SkipWithError(("posenc exceeds the derived float64 bound: error / bound = " + std::to_string(e)).c_str());
    return;
  }
  for (auto _ : state) {
    w.RunFlash();
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(saved);
  state.counters["GFLOP/s"] =
      benchmark::Counter(AttentionFlops(c) * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_FlashTiling)
    ->Name("attention/flash_tiling")
    ->ArgsProduct({{32, 64, 128, 256}, {128, 256, 512}, {64, 128}})
    ->Unit(benchmark::kMillisecond);

void BM_Sgemm1Thread(benchmark::State& state) {
  const int64_t n = 2048;
  std::vector<float> a = Random(n * n, 4), b = Random(n * n, 5), c(n * n);
  SetBlasThreads(1);
  for (auto _ : state) {
    GemmNT(n, n, n, a.data(), n, b.data(), n, c.data(), n);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * n * n * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Sgemm1Thread)->Name("attention/sgemm_2048_1thread")->Unit(benchmark::kMillisecond);

void BM_Forward(benchmark::State& state, RopeMethod method) {
  // data/ next to the build directory (build/posenc_gbench -> data/), as the CLI finds it.
  static const Transformer model = Transformer::Load(FindDataFile("stories260K.bin", DefaultDataDirs("")));
  const int64_t n = state.range(0);
  SetBlasThreads(1);
  const MethodRope rope = BuildMethodRope(method, n, model.config());
  std::vector<int> tokens(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) tokens[t] = static_cast<int>(3 + (t * 7919) % 509);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = t;
  const ForwardRope frope = rope.forward();
  ForwardState fs;
  std::vector<float> logits(static_cast<size_t>(n * model.config().vocab_size));
  model.Forward(tokens, positions, frope, fs, logits.data());
  for (float x : logits) {
    if (!std::isfinite(x)) {
      state.SkipWithError("non-finite logits");
      return;
    }
  }
  for (auto _ : state) {
    model.Forward(tokens, positions, frope, fs, logits.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK_CAPTURE(BM_Forward, none, RopeMethod::kNone)
    ->Name("forward/stories260K_none")->Arg(256)->Arg(2048)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Forward, dynamic, RopeMethod::kDynamic)
    ->Name("forward/stories260K_dynamic")->Arg(2048)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace posenc::bench
