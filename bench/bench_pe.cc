// Google Benchmark for the absolute-PE kernels: learned gather / gather-add / scatter-add / SGD step and the
// sinusoidal add, each on the Highway path ("simd"), the scalar reference path and the plain C++ loop, on the
// shapes of bench/pe_suite.h (4096 tokens x d_model 768 and 4096, decode 1 token). The STREAM copy to compare
// with is bench_rope.cc's `stream_copy`, in the same binary; `posenc bench` (RunPeBench) measures both in one
// run and reports % of STREAM. Each variant is checked bit for bit against the scalar path once, before its
// first timing.
//
//   build-pe/posenc_gbench --benchmark_filter='pe/.*_4096x768|stream_copy' --benchmark_min_time=0.5
//
// bytes_per_second counts PeBytesMoved (what the kernel must read and write). Calls repeat on the same
// buffers with hot caches where they fit (4096 x 768 x 4 B = 12 MiB per buffer does, on a 32 MiB L3).
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>

#include "pe_suite.h"
#include "posenc/kernels/pe_kernels.h"

namespace posenc::bench {
namespace {

// One workload per case, built on first use and kept (the 4096 x 4096 buffers are 64 MiB each).
PeWorkload& Workload(const PeCase& c) {
  static std::map<std::string, std::unique_ptr<PeWorkload>> cache;
  auto& w = cache[c.name];
  if (!w) w = std::make_unique<PeWorkload>(c);
  return *w;
}

void BM_Pe(benchmark::State& state, PeCase c, std::string which) {
  PeWorkload& w = Workload(c);
  static std::map<std::string, bool> validated;
  const std::string key = c.name + "/" + which;
  if (which != "scalar" && !validated[key]) {
    const std::string err = w.Validate(which);
    if (!err.empty()) {
      state.SkipWithError(("differs from the scalar path: " + err).c_str());
      return;
    }
    validated[key] = true;
  }
  for (auto _ : state) {
    w.Run(which);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * PeBytesMoved(c));
  state.SetLabel(kernels::PeKernelTargetName());
}

// Registers pe/{simd,scalar,plain_cpp,table_gather_add}/<case> before benchmark_main runs.
const bool kRegistered = [] {
  for (const PeCase& c : DefaultPeCases()) {
    for (const char* which : {"simd", "scalar", "plain_cpp", "table_gather_add"}) {
      // The variants PeWorkload::Has accepts (decided by the kernel alone, without allocating the buffers).
      const bool sinusoidal = c.kernel == PeBenchKernel::kSinusoidalAdd;
      const std::string w(which);
      if ((w == "plain_cpp" && sinusoidal) || (w == "table_gather_add" && !sinusoidal)) continue;
      benchmark::RegisterBenchmark(("pe/" + w + "/" + c.name).c_str(), BM_Pe, c, w)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
    }
  }
  return true;
}();

}  // namespace
}  // namespace posenc::bench
