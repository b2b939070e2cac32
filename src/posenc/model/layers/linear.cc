// Linear layer: see linear.h.
#include "posenc/model/layers/linear.h"

#include <fmt/format.h>

#include <vector>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/model/layers/parallel.h"

namespace posenc {
namespace {

// Fixed block sizes of the BLAS calls (OpenBLAS's result for a row depends on the call's row count, so the blocks
// must not follow the thread count): rows of y / dx per call, and rows of dw per call (each summed over all n).
constexpr int64_t kRowBlock = 256;
constexpr int64_t kWeightRowBlock = 32;

void CheckSizes(const char* name, int64_t n, int64_t in, int64_t out) {
  if (n < 0 || in < 0 || out < 0) {
    throw ShapeError(fmt::format("{}: n, in and out must be >= 0, got {}, {}, {}", name, n, in, out));
  }
}

void CheckPointer(const char* name, const void* p, const char* what) {
  if (p == nullptr) throw ShapeError(fmt::format("{}: {} is null", name, what));
}

}  // namespace

template <typename T>
void LinearForward(const T* x, const T* w, const T* b, int64_t n, int64_t in, int64_t out, T* y, OutputMode mode) {
  // x [n, in], w [out, in], b [out] or null, y [n, out]
  CheckSizes("LinearForward", n, in, out);
  if (n == 0 || out == 0) return;
  CheckPointer("LinearForward", x, "x");
  CheckPointer("LinearForward", w, "w");
  CheckPointer("LinearForward", y, "y");
  OneBlasThread one_blas_thread;
  const T beta = mode == OutputMode::kAccumulate ? T{1} : T{0};
  layers::ForEachBlock(n, kRowBlock, [&](int64_t r0, int64_t r1) {
    GemmNT(r1 - r0, out, in, x + r0 * in, in, w, in, y + r0 * out, out, beta);
    if (b != nullptr) {
      for (int64_t r = r0; r < r1; ++r) {
        T* yr = y + r * out;
#pragma omp simd
        for (int64_t o = 0; o < out; ++o) yr[o] += b[o];
      }
    }
  });
}

template <typename T>
void LinearBackward(const T* dy, const T* x, const T* w, int64_t n, int64_t in, int64_t out, T* dx, T* dw, T* db) {
  // dy [n, out], x [n, in], w [out, in]; dx [n, in] +=, dw [out, in] +=, db [out] +=
  CheckSizes("LinearBackward", n, in, out);
  if (n == 0 || out == 0) return;
  CheckPointer("LinearBackward", dy, "dy");
  CheckPointer("LinearBackward", x, "x");
  CheckPointer("LinearBackward", w, "w");
  CheckPointer("LinearBackward", dw, "dw");
  OneBlasThread one_blas_thread;
  if (dx != nullptr && in > 0) {  // dx[r0:r1] += dy[r0:r1] W
    layers::ForEachBlock(n, kRowBlock, [&](int64_t r0, int64_t r1) {
      GemmNN(r1 - r0, in, out, dy + r0 * out, out, w, in, dx + r0 * in, in, T{1});
    });
  }
  // dw[o0:o1] += dy[:, o0:o1]^T x, each row of dw summed over all n rows in one call
  layers::ForEachBlock(out, kWeightRowBlock, [&](int64_t o0, int64_t o1) {
    GemmTN(o1 - o0, in, n, dy + o0, out, x, in, dw + o0 * in, in, T{1});
  });
  if (db != nullptr) {
    std::vector<double> sum(static_cast<size_t>(out));
    layers::ReduceRowBlocks(
        n, out,
        [&](int64_t r0, int64_t r1, double* acc) {
          for (int64_t r = r0; r < r1; ++r) {
            const T* dyr = dy + r * out;
#pragma omp simd
            for (int64_t o = 0; o < out; ++o) acc[o] += static_cast<double>(dyr[o]);
          }
        },
        sum.data());
    for (int64_t o = 0; o < out; ++o) db[o] += static_cast<T>(sum[static_cast<size_t>(o)]);
  }
}

template void LinearForward<float>(const float*, const float*, const float*, int64_t, int64_t, int64_t, float*,
                                   OutputMode);
template void LinearForward<double>(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                    double*, OutputMode);
template void LinearBackward<float>(const float*, const float*, const float*, int64_t, int64_t, int64_t, float*,
                                    float*, float*);
template void LinearBackward<double>(const double*, const double*, const double*, int64_t, int64_t, int64_t,
                                     double*, double*, double*);

}  // namespace posenc
