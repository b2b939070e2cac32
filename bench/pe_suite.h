// The absolute-PE benchmark suite (learned gather / gather-add / scatter-add / SGD step, sinusoidal add),
// shared by `posenc bench` (cli/cmd_bench.cc, through RunPeBench) and the Google Benchmark binary posenc_gbench
// (bench/bench_pe.cc): shapes, workloads, baselines, validation before timing and the JSON report.
//
// Every figure of one report is measured in the same process run (the STREAM copy included), so ratios
// between them are meaningful on a shared, noisy machine; absolute GB/s are not comparable across runs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace posenc::bench {

/// What one case times (float32 throughout: the pe/ API has no other dtype).
enum class PeBenchKernel {
  kGather,         // LearnedPeForward: out[t] = wpe[pos[t]]
  kGatherAdd,      // LearnedPeForwardAdd: x[t] += wpe[pos[t]] (also the add of a precomputed sinusoidal table)
  kScatterAdd,     // LearnedPeBackward: dwpe[pos[t]] += dout[t]
  kSgd,            // LearnedPeSgdStep: wpe -= lr * dwpe over the whole table [max_seq_len, d_model]
  kSinusoidalAdd,  // AddSinusoidal: x[t] += PE(pos[t]), rows built from double sin/cos on every call
};

/// "learned_pe_gather", "learned_pe_gather_add", "learned_pe_scatter_add", "learned_pe_sgd", "sinusoidal_add".
const char* PeBenchKernelName(PeBenchKernel kernel);

/// One timed shape: x / dout [n_tokens, d_model] contiguous, the table [max_seq_len, d_model]; token t sits at
/// position t (prefill) or at position max_seq_len - 1 (decode, n_tokens = 1).
struct PeCase {
  std::string name;  // e.g. "gather_add_4096x768"
  PeBenchKernel kernel = PeBenchKernel::kGatherAdd;
  int64_t n_tokens = 0;
  int64_t d_model = 0;
  int64_t max_seq_len = 0;  // table rows
  bool cold = true;         // flush the caches before each timed call (prefill); false: hot repeats (decode)
};

/// 4096 tokens x d_model 768 (GPT-2 small: wpe is [1024, 768]; here [4096, 768] so every token has a row) and
/// 4096 (Llama-2-7B width) for every kernel; a decode gather-add of 1 x 768 and 1 x 4096 (hot). `filter`: keep
/// names matching it (MatchesFilter, suite_util.h: comma-separated substrings; empty: all).
std::vector<PeCase> DefaultPeCases(const std::string& filter = "");

/// Bytes the kernel must move, float32: gather 2 n d (read the row, write the token); gather-add and
/// scatter-add 3 n d (read both, write one); SGD 3 max_seq_len d; sinusoidal add 2 n d (x read and written; the
/// PE values are computed, not loaded), times 4 bytes.
int64_t PeBytesMoved(const PeCase& c);

/// Buffers of one case and the variants timed on them. Calls repeat on the same buffers (adds accumulate; the
/// values stay finite for far more calls than a benchmark makes).
class PeWorkload {
 public:
  /// Allocates and fills x / dout and the table (uniform [-1, 1), fixed seed). Errors: std::bad_alloc.
  explicit PeWorkload(const PeCase& c);
  ~PeWorkload();
  PeWorkload(const PeWorkload&) = delete;
  PeWorkload& operator=(const PeWorkload&) = delete;

  const PeCase& pe_case() const { return case_; }
  /// Runs one variant:
  ///   "simd":      the public pe/ function on the Highway path (threads for large calls);
  ///   "scalar":    the same function on the scalar reference path (single-threaded);
  ///   "plain_cpp": the loop a C++ programmer writes first (llm.c style, one thread, compiled like the library:
  ///                -O3, no -march, so GCC vectorises it for SSE2); gather: std::memcpy per row; sinusoidal:
  ///                not applicable (see Has);
  ///   "table_gather_add" (sinusoidal only): the recommended alternative, a precomputed SinusoidalTable held
  ///                in a LearnedPositionalEmbedding and added with LearnedPeForwardAdd (bit-identical result).
  void Run(const std::string& which);
  /// Whether `which` applies to this case.
  bool Has(const std::string& which) const;
  /// Runs `which` and the scalar path from the same inputs and compares every output bit (the kernels are exact,
  /// see pe_kernels.h). Leaves the buffers with fresh inputs. Returns "" if identical, else the first mismatch.
  std::string Validate(const std::string& which);

 private:
  struct Buffers;
  PeCase case_;
  std::unique_ptr<Buffers> b_;
};

/// What RunPeBench measures.
struct PeBenchOptions {
  std::string filter;                           // comma-separated case-name substrings; empty: every case
  int threads = 0;                              // OpenMP threads (0: OpenMP's default)
  int reps = 9;                                 // timed calls (cold) or batches (hot) per figure
  int64_t stream_bytes = int64_t{256} << 20;    // per STREAM array
  std::function<void(const std::string&)> log;  // progress lines (may be empty)
  // Limits already measured earlier in the same run (`posenc bench` passes the rope suite's): when all three
  // are > 0 they are used as they are and not measured again.
  double stream_copy_gbps = 0;
  double stream_copy_gbps_1thread = 0;
  double stream_rmw_gbps = 0;
};

/// One case's figures. GB/s always counts PeBytesMoved(case), whatever a baseline actually moves.
struct PeResult {
  PeCase c;
  int64_t bytes = 0;                          // PeBytesMoved(c)
  double gbps = 0;                            // "simd", default threads, from the best call
  double gbps_median = 0;                     // "simd", from the median call
  double gbps_1thread = 0;                    // "simd" with one OpenMP thread
  double ns_per_call = 0;                     // "simd", best call
  double ns_per_call_median = 0;              // "simd", median call
  double pct_of_stream = 0;                   // 100 * gbps / stream_copy_gbps (same run, same thread count)
  double pct_of_stream_rmw = 0;               // 100 * gbps / stream_rmw_gbps
  std::map<std::string, double> baselines;    // "scalar", "plain_cpp", "table_gather_add" -> GB/s (best call)
  std::map<std::string, double> baseline_ns;  // the same, ns per call
};

struct PeBenchReport {
  double stream_copy_gbps = 0;  // default threads
  double stream_copy_gbps_1thread = 0;
  double stream_rmw_gbps = 0;  // in-place a[i] *= k (StreamRmwGbps), default threads: the in-place ceiling
  int threads = 0;
  std::string cpu;  // /proc/cpuinfo model name, hardware threads, Highway target
  std::string hwy_target;
  std::vector<PeResult> results;
  std::vector<std::string> notes;
  double load_average_start = -1;  // /proc/loadavg, 1 minute
  double load_average_end = -1;
};

/// Validates every variant of every case against the scalar path (bit for bit), then times simd (default
/// threads and one thread), scalar, plain_cpp (and table_gather_add for sinusoidal) `reps` times each,
/// interleaved, and reports each from its best call (other processes only ever add time); medians are kept.
/// The STREAM copy and in-place read-modify-write (StreamCopyGbps, StreamRmwGbps of rope_suite.h) are measured
/// first, in the same run.
/// Errors: std::runtime_error naming the case and variant if a validation fails.
PeBenchReport RunPeBench(const PeBenchOptions& options);

/// The kernel-report JSON: top level stream_copy_gbps, threads, cpu; results [{kernel, dtype "float32", layout,
/// shape [tokens, 1, d_model], rotary_dim null, gbps, pct_of_stream, ns_per_call, baselines {name: gbps}}];
/// layout is "interleaved" for sinusoidal_add (the paper's channel order) and "rows" for the learned table.
/// Extra keys: stream_copy_gbps_1thread, stream_rmw_gbps, hwy_target, load_average [start, end], notes; per result
/// case, max_seq_len, cold, bytes, gbps_1thread, pct_of_stream_rmw, gbps_median, ns_per_call_median,
/// baseline_ns_per_call, ratios {name: gbps / baseline}.
nlohmann::json ToJson(const PeBenchReport& report);

/// A fixed-width text table of the report (one line per case, ratios to each baseline).
std::string FormatPeReport(const PeBenchReport& report);

}  // namespace posenc::bench
