// Google Benchmark for apply_rope: posenc's SIMD kernel (table and on-the-fly cos/sin), its scalar reference and HF's formulation in plain
// C++ on the target shapes (bench/rope_suite.h), beside a STREAM-style copy measured in the same run.
// Each kernel is checked against the scalar reference once, before its first timing.
//
//   build-simd/posenc_gbench --benchmark_filter='rope/.*prefill_q_4096x32x128' --benchmark_min_time=1
//
// bytes_per_second counts the rotated channels read and written (BytesMoved). Calls repeat on the same
// buffers (hot caches for shapes that fit them); `posenc bench` adds cold-cache timings, the PyTorch
// baseline, sgemm and the JSON report.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "rope_suite.h"

namespace posenc::bench {
namespace {

// One workload per case, built on first use and kept (prefill buffers are 16-64 MiB).
RopeWorkload& Workload(const RopeCase& c) {
  static std::map<std::string, std::unique_ptr<RopeWorkload>> cache;
  auto& w = cache[c.name];
  if (!w) w = std::make_unique<RopeWorkload>(c);
  return *w;
}

void BM_Rope(benchmark::State& state, RopeCase c, std::string which) {
  RopeWorkload& w = Workload(c);
  static std::map<std::string, bool> validated;
  const std::string key = c.name + "/" + which;
  if (which != "scalar" && !validated[key]) {
    const std::string err = w.Validate(which);
    if (!err.empty()) {
      state.SkipWithError(("differs from the scalar reference: " + err).c_str());
      return;
    }
    validated[key] = true;
  }
  for (auto _ : state) {
    w.Run(which);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * BytesMoved(c));
  state.SetLabel(kernels::RopeKernelTargetName());
}

// STREAM-style copy a[i] = b[i] over two 256 MiB arrays, all OpenMP threads; bytes as STREAM counts them.
void BM_StreamCopy(benchmark::State& state) {
  const int64_t n = int64_t{64} << 20;  // floats per array
  static std::vector<float> a(static_cast<size_t>(n), 0.0f), b(static_cast<size_t>(n), 1.0f);
  float* pa = a.data();
  const float* pb = b.data();
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * 2 * n * static_cast<int64_t>(sizeof(float)));
  state.counters["threads"] = omp_get_max_threads();
}

// Registers stream_copy and rope/{simd,on_the_fly,scalar,hf_cpp,hf_cpp_per_head}/<case> before benchmark_main
// runs (on_the_fly: the SIMD kernel computing cos/sin per token instead of reading the table).
const bool kRegistered = [] {
  benchmark::RegisterBenchmark("stream_copy", BM_StreamCopy)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (const RopeCase& c : DefaultRopeCases()) {
    for (const char* which : {"simd", "on_the_fly", "scalar", "hf_cpp", "hf_cpp_per_head"}) {
      if ((std::string(which) == "hf_cpp" || std::string(which) == "hf_cpp_per_head") &&
          c.layout != RopeLayout::kHalfSplit) {
        continue;
      }
      benchmark::RegisterBenchmark(("rope/" + std::string(which) + "/" + c.name).c_str(), BM_Rope, c,
                                   std::string(which))
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace posenc::bench
