// The apply_rope benchmark suite shared by `posenc bench` (cli/cmd_bench.cc) and the Google Benchmark binary
// posenc_gbench (bench/bench_rope.cc): shapes, workloads, baselines, the memory-bandwidth and sgemm
// references, validation before timing, and the JSON report.
//
// Every figure of one report is measured in the same process run, so ratios between them are meaningful
// on a shared, noisy machine; absolute GB/s are not comparable across runs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc/core/dtype.h"
#include "posenc/kernels/rope_kernels.h"
#include "posenc/rope/layout.h"

namespace posenc::bench {

/// One timed shape. Q is [n_tokens, n_heads, head_dim], K (when k_heads > 0) is [n_tokens, k_heads,
/// head_dim], both contiguous; token t sits at position t (decode: one token at position 4095).
struct RopeCase {
  std::string name;  // e.g. "prefill_q_4096x32x128"
  int64_t n_tokens = 0;
  int64_t n_heads = 0;  // query heads
  int64_t k_heads = 0;  // 0: Q only; > 0: Q and K in one RopeKernelQK call
  int64_t head_dim = 0;
  int64_t rotary_dim = 0;  // channels [0, rotary_dim) rotated
  DType dtype = DType::kF32;
  RopeLayout layout = RopeLayout::kHalfSplit;
  bool cold = true;  // flush the caches before each timed call (prefill); false: hot repeats (decode)
};

/// The target shapes: decode 1x32x128 (Q and K), prefill 4096x32x128 (Llama-2-7B Q) and 4096x8x128
/// (GQA K), head_dim 64 and 96, rotary_dim 16 of 64 (GPT-NeoX), each in float32 and bfloat16, half-split;
/// the interleaved layout for decode and the 4096x32x128 prefill; stories260K (256 tokens, 8 Q / 4 K heads
/// of 8, interleaved). `filter`: see MatchesFilter (suite_util.h): comma-separated substrings, empty keeps all.
std::vector<RopeCase> DefaultRopeCases(const std::string& filter = "");

/// Bytes the rotation must move: rotated channels of Q and K, read once and written once.
int64_t BytesMoved(const RopeCase& c);

/// Buffers of one case and the kernels timed on them. All runs rotate in place, repeatedly (a rotation keeps
/// the norm, so repeated calls stay finite); Reset() restores the original inputs.
class RopeWorkload {
 public:
  /// Allocates and fills Q/K (uniform [-1, 1), fixed seed) and the cos/sin tables (rope_theta 10000, exact
  /// precision). Errors: std::bad_alloc.
  explicit RopeWorkload(const RopeCase& c);
  ~RopeWorkload();
  RopeWorkload(const RopeWorkload&) = delete;
  RopeWorkload& operator=(const RopeWorkload&) = delete;

  const RopeCase& rope_case() const { return case_; }
  void Reset();
  /// posenc: RopeKernelQK / RopeKernelSimd (Highway, threads for large calls).
  void RunSimd();
  /// posenc with cos/sin computed on the fly inside the kernel (RopeKernelQK / RopeKernelSimd with inv_freq,
  /// kExact, rows = position ids) instead of read from the table: the same call otherwise.
  void RunOnTheFly();
  /// posenc's scalar reference path (RopeKernelScalar), single-threaded.
  void RunScalar();
  /// Hugging Face's formulation as HF runs it, written plainly in C++ (half-split only): per tensor, the
  /// temporary rot = rotate_half(x) over the whole tensor, then a new output tensor
  /// cat(x_rot * cos + rot * sin, x_pass), cos/sin rows over the rotated dim (cat(freqs, freqs)); float32
  /// math, one thread, compiled like the library (-O3, no -march, so GCC vectorises it for SSE2). The
  /// temporary and output are preallocated (HF allocates them on every call).
  void RunHfCpp();
  /// The same arithmetic with a one-head temporary, in place: the strongest plain C++ port.
  void RunHfCppPerHead();
  /// The memory limit of this exact layout: flips the sign bit of every rotated channel of Q and K in place
  /// (exact, no arithmetic), touching the same bytes in the same order as the kernel; OpenMP threads for cold
  /// cases. For partial rotary it reads 1 of every head_dim / rotary_dim lines' worth, as the kernel must.
  void RunLayoutRmw();
  /// Runs "simd", "on_the_fly", "scalar", "hf_cpp", "hf_cpp_per_head" or "layout_rmw" (see Has).
  void Run(const std::string& which);
  /// Whether `which` applies to this case (the hf_cpp variants need the half-split layout).
  bool Has(const std::string& which) const;

  /// Runs `which` ("simd", "on_the_fly", "hf_cpp" or "hf_cpp_per_head") and the scalar reference from the
  /// original inputs and checks every element within the bound RopeKernelSimd documents (fused multiply-add:
  /// 3u (|p1| + |p2|) per float32 result, plus one storage unit for bfloat16; on_the_fly 6u, its coefficients
  /// being within 1 ulp of the table's, see tests/kernels/rope_kernels_test.cc OnTheFlyMatchesTablePath);
  /// pass-through channels must stay bit-identical. Leaves the buffers Reset(). Returns "" if all match, else a
  /// description of the first mismatch.
  std::string Validate(const std::string& which);

 private:
  struct Buffers;
  RopeCase case_;
  std::unique_ptr<Buffers> b_;
};

/// STREAM-style copy a[i] = b[i] over two float32 arrays of `bytes_per_array` (much larger than the caches),
/// OpenMP-parallel over `threads`; GB/s counted as STREAM counts copy (2 * bytes_per_array per pass),
/// median of `reps` passes.
double StreamCopyGbps(int threads, int64_t bytes_per_array, int reps);

/// In-place read-modify-write a[i] = a[i] * k over one float32 array of `bytes` (what an in-place kernel must
/// move: each line read once and written once, no write-allocate), `threads` OpenMP threads; GB/s counted as
/// 2 * bytes per pass, median of `reps` passes.
double StreamRmwGbps(int threads, int64_t bytes, int reps);

/// OpenBLAS sgemm (posenc::GemmNT) on n x n x n with `threads` BLAS threads: GFLOP/s (2 n^3 per call), median
/// of `reps` calls after one warm-up.
double SgemmGflops(int threads, int64_t n, int reps);

/// What `posenc bench` measures.
struct RopeBenchOptions {
  std::string filter;                         // comma-separated case-name substrings; empty: every case
  int threads = 0;                            // OpenMP threads (0: OpenMP's default)
  int reps = 9;                               // timed calls (cold) or batches (hot) per figure
  bool torch = true;                          // run the PyTorch HF baseline script
  std::string python = "/usr/bin/python3";    // Debian's python3 (python3-torch)
  std::string torch_script;                   // empty: <source>/bench/torch_rope_baseline.py
  int64_t stream_bytes = int64_t{256} << 20;  // per STREAM array
  int64_t sgemm_n = 2048;
  std::function<void(const std::string&)> log;  // progress lines (may be empty)
};

/// One case's figures. Baselines: "scalar", "hf_cpp", "hf_cpp_per_head", "torch_hf" (GB/s, absent when not
/// measured). GB/s always counts BytesMoved(case), whatever a baseline actually moves.
struct RopeResult {
  RopeCase c;
  int64_t bytes = 0;                        // BytesMoved(c)
  double gbps = 0;                          // posenc (default threads), from the best call
  double gbps_median = 0;                   // posenc, from the median call
  double gbps_1thread = 0;                  // posenc with one thread (the same code as gbps below the thread size)
  double ns_per_call = 0;                   // posenc, best call
  double ns_per_call_median = 0;            // posenc, median call
  double pct_of_stream = 0;                 // 100 * gbps / stream_copy_gbps
  double pct_of_stream_rmw = 0;             // 100 * gbps / stream_rmw_gbps
  double limit_gbps = 0;                    // layout_rmw (cold cases only): the same bytes flipped in place
  double pct_of_limit = 0;                  // 100 * gbps / limit_gbps
  double gbps_on_the_fly = 0;               // posenc, cos/sin computed in the kernel (default threads), best call
  double ns_per_call_on_the_fly = 0;        // the same, ns per call
  std::map<std::string, double> baselines;  // name -> GB/s (best call)
  std::map<std::string, double> baseline_ns;  // name -> ns per call (best call)
};

struct RopeBenchReport {
  double stream_copy_gbps = 0;  // default threads
  double stream_copy_gbps_1thread = 0;
  double stream_rmw_gbps = 0;  // in-place read-modify-write, default threads
  double sgemm_gflops = 0;
  int threads = 0;
  std::string cpu;  // /proc/cpuinfo model name, core count, Highway target
  std::string hwy_target;
  std::vector<RopeResult> results;
  std::vector<std::string> notes;  // skipped baselines and why
  double load_average_start = -1;  // /proc/loadavg, 1 minute, before and after the run
  double load_average_end = -1;
};

/// Validates each case once (simd, on_the_fly and both hf_cpp variants against the scalar reference), then
/// times posenc (default threads and one thread; table and on-the-fly cos/sin), the scalar path and the hf_cpp variants `reps` times each, interleaved, and
/// reports each from its best (fastest) call: on a shared machine other processes only ever add time, so the best
/// call is the estimator least disturbed by them (medians are kept in the JSON). The PyTorch script does the same.
/// Errors: std::runtime_error naming the case if a validation fails.
RopeBenchReport RunRopeBench(const RopeBenchOptions& options);

/// The kernel-report JSON: top level stream_copy_gbps, sgemm_gflops, threads, cpu; results [{kernel, dtype, layout,
/// shape [tokens, heads, head_dim], rotary_dim, gbps, pct_of_stream, ns_per_call, baselines {name: gbps}}],
/// plus extra keys (stream_copy_gbps_1thread, stream_rmw_gbps, hwy_target, load_average [start, end], notes; per
/// result case, k_heads, cold, bytes, gbps_1thread, pct_of_stream_rmw, layout_rmw_gbps, pct_of_layout_rmw,
/// baseline_ns_per_call, ratios {name: gbps / baseline}, on_the_fly_gbps, on_the_fly_ns_per_call,
/// on_the_fly_vs_table = table ns / on-the-fly ns).
nlohmann::json ToJson(const RopeBenchReport& report);

/// A fixed-width text table of the report (one line per case, ratios to each baseline).
std::string FormatReport(const RopeBenchReport& report);

}  // namespace posenc::bench
