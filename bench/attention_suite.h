// The attention part of `posenc bench` (cli/cmd_bench.cc) and of posenc_gbench (bench/bench_attention.cc): tiled
// causal attention with RoPE (FlashCausalAttention) against OpenBLAS sgemm's FLOP rate, the row-at-a-time
// CausalAttention and a naive "materialise L x L per head" path, all measured in the same process run.
//
// FLOPs per call (the same numerator for posenc and every baseline, whatever a baseline actually computes):
// 4 * head_dim per unmasked (query head, key) pair = n_heads * 4 * head_dim * L (L + 1) / 2 (2 * head_dim for
// q.k, 2 * head_dim for w v). RoPE, exp and the row sums are not counted.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc/attention/flash_attention.h"
#include "posenc/rope/layout.h"

namespace posenc::bench {

/// One timed shape: L tokens of self-attention (q_pos0 = 0, n_q = n_k = L), q [L, n_heads, head_dim], k and v
/// [L, n_kv_heads, head_dim], contiguous; RoPE over rotary_dim channels in `layout`, rope_theta 10000.
struct AttentionCase {
  std::string name;  // e.g. "attention_L2048_hd128_32x8"
  int64_t n_tokens = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;
  RopeLayout layout = RopeLayout::kHalfSplit;
};

/// L = 512, 2048, 8192 x head_dim 64, 128, float32, half-split, full rotary. Heads: 32 query / 8 kv at 512 and
/// 2048 (Llama-2/3-like GQA 4), 4 / 1 at 8192 (same GQA ratio; keeps one call near a second). `filter`: keep names
/// matching it (MatchesFilter, suite_util.h: comma-separated substrings; "attention" keeps all; empty: all).
std::vector<AttentionCase> DefaultAttentionCases(const std::string& filter = "");

/// n_heads * 4 * head_dim * L (L + 1) / 2.
double AttentionFlops(const AttentionCase& c);

struct AttentionWorkloadData;

/// Buffers of one case (q, k, v standard normal from a fixed seed; rope table over [0, L); q/k rotated by
/// ApplyRope for the baselines) and the variants timed on them.
class AttentionWorkload {
 public:
  /// Errors: std::bad_alloc.
  explicit AttentionWorkload(const AttentionCase& c, const FlashTiling& tiling = {});
  ~AttentionWorkload();
  AttentionWorkload(const AttentionWorkload&) = delete;
  AttentionWorkload& operator=(const AttentionWorkload&) = delete;
  /// posenc: FlashCausalAttention, RoPE on q and k inside the call, OpenMP's current thread count.
  void RunFlash();
  /// CausalAttention (row at a time, one thread) on the pre-rotated q/k.
  void RunRow();
  /// Per head: L x L scores with sgemm, causal softmax, sgemm with V; pre-rotated q/k; heads over `threads`
  /// OpenMP threads, each with its own L x L buffer and a one-thread sgemm.
  void RunNaive(int threads);
  /// Runs RunFlash and returns the largest |out - float64 reference| / derived bound over query rows {0, L/2,
  /// L-1} x heads {0, last} (<= 1 passes; see flash_attention.h Precision).
  double FlashErrorOverBound();

 private:
  std::unique_ptr<AttentionWorkloadData> w_;
};

struct AttentionBenchOptions {
  std::string filter;
  int threads = 0;             // OpenMP threads (0: OpenMP's default)
  int reps = 5;                // timed calls per variant (best reported, median kept)
  int slow_reps = 2;           // timed calls of the row path and naive baseline when a call exceeds ~2 s
  double sgemm_gflops = 0;     // OpenBLAS sgemm 2048^3 at `threads` measured earlier in the same run (0: measure)
  int64_t sgemm_n = 2048;
  std::function<void(const std::string&)> log;
};

struct AttentionResult {
  AttentionCase c;
  double flops = 0;                 // AttentionFlops(c)
  double gflops = 0;                // posenc FlashCausalAttention with RoPE, default threads, best call
  double gflops_median = 0;
  double gflops_1thread = 0;        // the same on one thread
  double ns_per_call = 0;
  double ns_per_call_median = 0;
  double sgemm_gflops = 0;          // OpenBLAS sgemm n^3 at the run's threads, best of calls interleaved with this case
  double sgemm_gflops_1thread = 0;  // the same on one thread
  double pct_of_sgemm = 0;          // 100 * gflops / sgemm_gflops (this case's interleaved sgemm, same threads)
  double pct_of_sgemm_1thread = 0;  // 100 * gflops_1thread / sgemm_gflops_1thread
  double pct_of_run_sgemm = 0;      // 100 * gflops / the report's sgemm_gflops (measured once at the start)
  std::map<std::string, double> baselines;    // "row_path", "naive_sgemm" -> GFLOP/s (same FLOP count)
  std::map<std::string, double> baseline_ns;  // ns per call, best
  int64_t scratch_bytes = 0;        // FlashScratch::Bytes() after the call (rotated keys + per-thread tiles)
  int64_t scores_bytes = 0;         // L * L * 4: one materialised score matrix (what the naive path holds)
  double max_err_over_tol = 0;      // validation: largest |posenc - float64| / derived bound on sampled rows
};

struct AttentionBenchReport {
  double sgemm_gflops = 0;
  double sgemm_gflops_1thread = 0;
  int threads = 0;
  std::string hwy_target;  // FlashKernelTargetName()
  std::vector<AttentionResult> results;
  std::vector<std::string> notes;
};

/// Validates each case (posenc on sampled query rows {0, L/2, L-1} x heads {0, last} against a float64
/// reference from the definition, within the bound of flash_attention.h; the row path and the naive path
/// against posenc on the same rows), then times posenc (default threads and 1 thread), CausalAttention (1
/// thread, on pre-rotated q/k: RoPE time is counted for posenc only) and the naive path (per head: S = Q K^T
/// with sgemm, causal softmax, O = P V with sgemm; heads over the threads), interleaved with OpenBLAS sgemm n^3
/// at the run's threads and at 1 thread (the pct_of_sgemm denominators), best call reported.
/// Errors: std::runtime_error naming the case if a validation fails.
AttentionBenchReport RunAttentionBench(const AttentionBenchOptions& options);

/// Result entries in the kernel-report form: {kernel, case, dtype, layout, shape [tokens, heads, head_dim], rotary_dim,
/// gflops, pct_of_sgemm, ns_per_call, baselines {name: gflops}} plus kv_heads, flops, gflops_median,
/// gflops_1thread, pct_of_sgemm_1thread, sgemm_gflops, sgemm_gflops_1thread (this case's interleaved sgemm),
/// pct_of_run_sgemm (against the top-level sgemm_gflops), ns_per_call_median, baseline_ns_per_call, ratios {name: gflops /
/// baseline}, scratch_bytes, scores_bytes, max_err_over_tol.
nlohmann::json AttentionResultsJson(const AttentionBenchReport& report);

/// A fixed-width text table of the report.
std::string FormatAttentionReport(const AttentionBenchReport& report);

}  // namespace posenc::bench
