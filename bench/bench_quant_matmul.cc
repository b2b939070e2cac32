// Google Benchmark for QuantMatmul (kernels/quant_matmul.h): Y[n, out] = X[n, in] W^T with W in a ggml type,
// per type and path, against OpenBLAS sgemm on the float32 matrix of the same shape in the same process:
//   panel        QuantMatmulPath::kPanel: decode panels of W rows into an L2-sized buffer, sgemm per panel;
//   direct       QuantMatmulPath::kDirect: Highway dot products with the rows decoded in registers;
//   dequantized  W decoded once to float32 before timing (DequantizeMatrix, "at load"), then GemmNT per call.
// Shapes: a Llama-2-vocabulary classifier of a tiny model (out 32000, in 256) and its feed-forward / attention
// matrices (704 x 256, 768 x 256); n = 1 (decode) and 512 (prefill).
//
//   build/posenc_gbench --benchmark_filter='quant_matmul/(f32|q8_0|bf16)/.*/32000x256' --benchmark_min_time=0.2
//
// Times: CPU time of the calling thread for threads = 1 (where everything runs on that thread; the other
// processes on a shared machine do not count), wall time for threads = 2.
// Counters: FLOP/s counts 2 n out in per call; vs_sgemm = that rate / the rate of GemmNT on a float32 matrix of
// the same shape (measured once per shape, n and thread count on the same clock, best of 5 calls, in this
// process); weight_MiB =
// bytes the path keeps for W (quantized bytes; 4 per weight for "dequantized"); scratch_KiB = the panel
// buffers. Each path's result is checked once against the dequantized product before timing: within
// 2 gamma_in sum_k |x_k w_k| (both are float32 sums of `in` products of the same values).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <time.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/dtype.h"
#include "posenc/kernels/ggml_types.h"
#include "posenc/kernels/quant_dot.h"
#include "posenc/kernels/quant_matmul.h"

namespace posenc::bench {
namespace {

// Where a block keeps its binary16 scales (ggml-common.h), for weights whose scales are all finite.
struct ScaleFields {
  GgmlType type;
  int first, second;  // byte offsets in the block; second = -1 when there is one scale
};
constexpr ScaleFields kScaleFields[] = {
    {GgmlType::kQ8_0, 0, -1}, {GgmlType::kQ4_0, 0, -1}, {GgmlType::kQ5_0, 0, -1},  {GgmlType::kIQ4_NL, 0, -1},
    {GgmlType::kQ4_1, 0, 2},  {GgmlType::kQ5_1, 0, 2},  {GgmlType::kQ4_K, 0, 2},   {GgmlType::kQ5_K, 0, 2},
    {GgmlType::kQ2_K, 80, 82}, {GgmlType::kQ3_K, 108, -1}, {GgmlType::kQ6_K, 208, -1}};

struct Shape {
  int64_t out, in;
};

// One weight matrix per (type, shape): random codes, scales 2^-6, plain types N(0, 1) values.
struct Weights {
  GgmlType type;
  Shape shape;
  std::vector<uint8_t> bytes;
  std::vector<float> dequantized;  // [out, in], for the "dequantized" path and the check
};

Weights& GetWeights(GgmlType type, Shape s) {
  static std::map<std::string, std::unique_ptr<Weights>> cache;
  auto& slot = cache[std::string(GgmlTypeName(type)) + std::to_string(s.out) + "x" + std::to_string(s.in)];
  if (slot) return *slot;
  slot = std::make_unique<Weights>(Weights{type, s, {}, {}});
  const int64_t row_bytes = GgmlRowBytes(type, s.in);
  std::vector<uint8_t>& b = slot->bytes;
  b.resize(static_cast<size_t>(row_bytes * s.out));
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t n = s.out * s.in;
  if (type == GgmlType::kF32) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = normal(rng);
      std::memcpy(&b[static_cast<size_t>(4 * i)], &v, 4);
    }
  } else if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    for (int64_t i = 0; i < n; ++i) {
      const uint16_t h = type == GgmlType::kF16 ? F32ToF16(normal(rng)) : F32ToBF16(normal(rng));
      std::memcpy(&b[static_cast<size_t>(2 * i)], &h, 2);
    }
  } else {
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& v : b) v = static_cast<uint8_t>(byte(rng));
    const auto* f = std::find_if(std::begin(kScaleFields), std::end(kScaleFields),
                                 [&](const ScaleFields& sf) { return sf.type == type; });
    const uint16_t scale = F32ToF16(1.0f / 64);
    const size_t block_bytes = static_cast<size_t>(GgmlTraits(type).type_size);
    for (size_t at = 0; at < b.size(); at += block_bytes) {
      std::memcpy(&b[at + static_cast<size_t>(f->first)], &scale, 2);
      if (f->second >= 0) std::memcpy(&b[at + static_cast<size_t>(f->second)], &scale, 2);
    }
  }
  slot->dequantized.resize(static_cast<size_t>(n));
  DequantizeMatrix(type, b.data(), s.out, s.in, slot->dequantized.data(), 1);
  return *slot;
}

std::vector<float> Activations(int64_t n, int64_t in) {
  std::vector<float> x(static_cast<size_t>(n * in));
  std::mt19937 rng(2);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  return x;
}

// Seconds on the clock the benchmark of `threads` threads reports: the calling thread's CPU time for one thread (other
// processes sharing the cores do not count), wall time for more.
double Clock(int threads) {
  if (threads > 1) return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GemmNT on a float32 matrix of the shape: FLOP/s of the best of 5 calls, once per (shape, n, threads).
double SgemmFlops(Shape s, int64_t n, int threads) {
  static std::map<std::string, double> cache;
  const std::string key = std::to_string(s.out) + "x" + std::to_string(s.in) + "n" + std::to_string(n) + "t" +
                          std::to_string(threads);
  if (cache.count(key)) return cache[key];
  const Weights& w = GetWeights(GgmlType::kF32, s);
  const std::vector<float> x = Activations(n, s.in);
  std::vector<float> y(static_cast<size_t>(n * s.out));
  const int saved = BlasThreads();
  SetBlasThreads(threads);
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {  // the first call warms up
    const double t0 = Clock(threads);
    GemmNT(n, s.out, s.in, x.data(), s.in, w.dequantized.data(), s.in, y.data(), s.out);
    const double sec = Clock(threads) - t0;
    if (rep > 0) best = std::min(best, sec);
  }
  SetBlasThreads(saved);
  return cache[key] = 2.0 * static_cast<double>(n * s.out * s.in) / best;
}

// "" if y is within 2 gamma_in sum |x w| of the dequantized float32 product, else the first output that is not.
std::string Check(const Weights& w, const std::vector<float>& x, int64_t n, const std::vector<float>& y) {
  const int64_t out = w.shape.out, in = w.shape.in;
  std::vector<float> ref(y.size()), mag(y.size());
  GemmNT(n, out, in, x.data(), in, w.dequantized.data(), in, ref.data(), out);
  std::vector<float> ax(x.size()), aw(w.dequantized.size());
  for (size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
  for (size_t i = 0; i < aw.size(); ++i) aw[i] = std::fabs(w.dequantized[i]);
  GemmNT(n, out, in, ax.data(), in, aw.data(), in, mag.data(), out);
  const double g = 2.0 * static_cast<double>(in) * 0x1p-24 / (1.0 - static_cast<double>(in) * 0x1p-24);
  for (size_t i = 0; i < y.size(); ++i) {
    // mag is itself a float32 sum of positive terms: at most (1 + gamma_in) below the exact magnitude.
    if (!(std::fabs(y[i] - ref[i]) <= g * 1.01 * mag[i])) {
      return "output " + std::to_string(i) + ": " + std::to_string(y[i]) + " vs " + std::to_string(ref[i]);
    }
  }
  return "";
}

void BM_QuantMatmul(benchmark::State& state, GgmlType type, std::string path, Shape s, int64_t n, int threads) {
  Weights& w = GetWeights(type, s);
  const std::vector<float> x = Activations(n, s.in);
  std::vector<float> y(static_cast<size_t>(n * s.out));
  QuantMatmulOptions options;
  options.threads = threads;
  options.path = path == "direct" ? QuantMatmulPath::kDirect : QuantMatmulPath::kPanel;
  if (path.rfind("panel@", 0) == 0) options.panel_rows = std::stoll(path.substr(6));  // panel height sweep
  const int saved = BlasThreads();
  const auto run = [&] {
    if (path == "dequantized") {
      GemmNT(n, s.out, s.in, x.data(), s.in, w.dequantized.data(), s.in, y.data(), s.out);
    } else {
      QuantMatmul(type, w.bytes.data(), s.out, s.in, x.data(), n, y.data(), options);
    }
  };
  SetBlasThreads(threads);  // the "dequantized" path's sgemm; QuantMatmul holds BLAS at one thread itself
  run();
  const std::string err = Check(w, x, n, y);
  if (!err.empty()) {
    SetBlasThreads(saved);
    state.SkipWithError(("differs from the dequantized product: " + err).c_str());
    return;
  }
  for (auto _ : state) {
    run();
    benchmark::ClobberMemory();
  }
  SetBlasThreads(saved);
  const double flop = 2.0 * static_cast<double>(n * s.out * s.in);
  state.counters["FLOP/s"] = benchmark::Counter(flop, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["vs_sgemm"] = benchmark::Counter(flop / SgemmFlops(s, n, threads),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  const double weight_bytes = path == "dequantized" ? 4.0 * static_cast<double>(s.out * s.in)
                                                    : static_cast<double>(w.bytes.size());
  state.counters["weight_MiB"] = weight_bytes / (1 << 20);
  state.counters["scratch_KiB"] =
      path == "panel" ? static_cast<double>(QuantMatmulScratchBytes(type, n, s.out, s.in, threads, options.path)) / 1024
      : options.panel_rows > 0 ? static_cast<double>(threads * std::min(options.panel_rows, s.out) * s.in * 4) / 1024
                               : 0.0;
  state.SetLabel(kernels::QuantKernelTargetName());
}

// One threads = 1 benchmark reports CPU time (the machine's other processes do not count), more threads wall time.
void Register(const std::string& name, GgmlType type, const std::string& path, Shape s, int64_t n, int threads) {
  auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_QuantMatmul, type, path, s, n, threads);
  b->Unit(benchmark::kMicrosecond);
  if (threads > 1) b->UseRealTime();
}

// Registers quant_matmul/<type>/<path>/<out>x<in>/n<n>/t<threads> before benchmark_main runs; path "panel@R" is
// the panel path with R weight rows per panel.
const bool kRegistered = [] {
  const GgmlType types[] = {GgmlType::kF32,  GgmlType::kF16,  GgmlType::kBF16, GgmlType::kQ8_0, GgmlType::kQ4_K,
                            GgmlType::kQ6_K, GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kQ4_0,
                            GgmlType::kQ4_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ5_K};
  for (const Shape s : {Shape{32000, 256}, Shape{768, 256}, Shape{704, 256}}) {
    for (int64_t n : {1, 4, 8, 16, 32, 512}) {
      for (int threads : {1, 2}) {
        for (GgmlType type : types) {
          for (const char* path : {"panel", "direct", "dequantized"}) {
            if (type == GgmlType::kF32 && std::string(path) == "dequantized") continue;  // the same as panel
            const std::string name = "quant_matmul/" + std::string(GgmlTypeName(type)) + "/" + path + "/" +
                                     std::to_string(s.out) + "x" + std::to_string(s.in) + "/n" + std::to_string(n) +
                                     "/t" + std::to_string(threads);
            Register(name, type, path, s, n, threads);
          }
        }
        for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kBF16}) {  // panel heights around the default
          for (const char* path : {"panel@64", "panel@256", "panel@1024", "panel@4096"}) {
            Register("quant_matmul/" + std::string(GgmlTypeName(type)) + "/" + path + "/" + std::to_string(s.out) +
                         "x" + std::to_string(s.in) + "/n" + std::to_string(n) + "/t" + std::to_string(threads),
                     type, path, s, n, threads);
          }
        }
      }
    }
  }
  return true;
}();

}  // namespace
}  // namespace posenc::bench
