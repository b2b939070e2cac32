// GEMM rates at 2048^3 for the prefill benchmark (bench/prefill_bench.sh): OpenBLAS sgemm (posenc's f32 path)
// and oneDNN's bf16 matmul through Bf16Weights (posenc's bf16 path: activations rounded per call, blocks of
// 512 output rows), and posenc's int8 path (Q8Weights: Q8_0 weights, activations quantized per call), on the
// threads given. Prints one line per GEMM: name, threads, best GFLOP/s (GOP/s for int8) of REPS calls.
//
//   posenc_gemm_peak THREADS [REPS]
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "posenc/blas/bf16_matmul.h"
#include "posenc/blas/blas_core.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/dtype.h"
#include "posenc/kernels/q8_matmul.h"

namespace {

template <typename F>
double BestGflops(int reps, double flops, F&& call) {
  double best = 0.0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    call();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (flops / s * 1e-9 > best) best = flops / s * 1e-9;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const int64_t n = 2048;
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    b[i] = static_cast<float>(i % 7) * 0.01f - 0.03f;
  }
  const double flops = 2.0 * n * n * n;
  posenc::SetBlasThreads(threads);
  const double sgemm = BestGflops(reps, flops, [&] {
    posenc::GemmNT(n, n, n, a.data(), n, b.data(), n, c.data(), n);
  });
  std::printf("sgemm_openblas threads %d: %.1f GFLOP/s (%s)\n", threads, sgemm, posenc::DescribeBlas().c_str());
  if (posenc::Bf16MatmulAvailable()) {
    const posenc::Bf16Weights w(n, n, [&](int64_t r, float* dst) {
      for (int64_t k = 0; k < n; ++k) dst[k] = b[r * n + k];
    });
    const double bf16 = BestGflops(reps, flops, [&] { w.Multiply(n, a.data(), n, c.data(), n, 0.0f, threads); });
    std::printf("bf16_onednn threads %d: %.1f GFLOP/s (%s)\n", threads, bf16,
                posenc::Bf16MatmulImplementation().c_str());
  } else {
    std::printf("bf16_onednn threads %d: unavailable (%s)\n", threads, posenc::OneDnnDescription().c_str());
  }
  if (posenc::Q8VnniAvailable()) {
    // b as Q8_0 blocks (float16 scale, 32 codes), as a GGUF holds them.
    std::vector<uint8_t> q8(static_cast<size_t>(n * n / 32 * 34));
    for (int64_t blk = 0; blk < n * n / 32; ++blk) {
      const uint16_t h = posenc::F32ToF16(0.03f / 127.0f);
      std::memcpy(&q8[static_cast<size_t>(blk * 34)], &h, 2);
      for (int64_t k = 0; k < 32; ++k) {
        const int code = static_cast<int>((blk * 32 + k) % 255) - 127;
        q8[static_cast<size_t>(blk * 34 + 2 + k)] = static_cast<uint8_t>(static_cast<int8_t>(code));
      }
    }
    const posenc::Q8Weights w(n, n, q8.data());
    const double int8 = BestGflops(reps, flops, [&] { w.Multiply(n, a.data(), n, c.data(), n, 0.0f, threads); });
    std::printf("int8_q8_0 threads %d: %.1f GOP/s (%s)\n", threads, int8, posenc::Q8KernelDescription().c_str());
  } else {
    std::printf("int8_q8_0 threads %d: unavailable (no AVX512-VNNI)\n", threads);
  }
  return 0;
}
