// RMSNorm layer: see rmsnorm.h.
#include "posenc/model/layers/rmsnorm.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/kernels/rmsnorm_row.h"
#include "posenc/model/layers/parallel.h"

namespace posenc {
namespace {

constexpr int64_t kMinRows = 128;  // rows per thread piece

void Check(const char* name, int64_t n, int64_t dim, std::initializer_list<const void*> pointers) {
  if (n < 0 || dim < 1) throw ShapeError(fmt::format("{}: n must be >= 0 and dim >= 1, got {} and {}", name, n, dim));
  if (n == 0) return;
  for (const void* p : pointers) {
    if (p == nullptr) throw ShapeError(fmt::format("{}: null input or output pointer for n = {}", name, n));
  }
}

}  // namespace

template <typename T>
void RmsNormForward(const T* x, const T* w, int64_t n, int64_t dim, double eps, T* y, T* rstd) {
  // x [n, dim], w [dim] -> y [n, dim], rstd [n]
  Check("RmsNormForward", n, dim, {x, w, y, rstd});
  if (!std::isfinite(eps) || eps < 0.0) throw ConfigError(fmt::format("RMSNorm eps must be finite and >= 0, got {}", eps));
  const T e = static_cast<T>(eps);
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) rstd[r] = kernels::RmsNormRow(x + r * dim, w, dim, e, y + r * dim);
  });
}

template <typename T>
void RmsNormBackward(const T* dy, const T* x, const T* w, const T* rstd, int64_t n, int64_t dim, T* dx, T* dw) {
  // dy, x [n, dim], w [dim], rstd [n]; dx [n, dim] +=, dw [dim] +=
  Check("RmsNormBackward", n, dim, {dy, x, w, rstd, dx, dw});
  if (n == 0) return;
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * dim;
      const T* g = dy + r * dim;
      const T s = rstd[r];
      double dot = 0.0;  // sum_c (dy_c w_c) xhat_c
#pragma omp simd reduction(+ : dot)
      for (int64_t c = 0; c < dim; ++c) dot += static_cast<double>(g[c] * w[c] * (xr[c] * s));
      const T m = static_cast<T>(dot / static_cast<double>(dim));
      T* dxr = dx + r * dim;
#pragma omp simd
      for (int64_t c = 0; c < dim; ++c) dxr[c] += s * (g[c] * w[c] - (xr[c] * s) * m);
    }
  });
  std::vector<double> sum(static_cast<size_t>(dim));
  layers::ReduceRowBlocks(
      n, dim,
      [&](int64_t r0, int64_t r1, double* acc) {
        for (int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * dim;
          const T* g = dy + r * dim;
          const T s = rstd[r];
#pragma omp simd
          for (int64_t c = 0; c < dim; ++c) acc[c] += static_cast<double>(g[c] * (xr[c] * s));
        }
      },
      sum.data());
  for (int64_t c = 0; c < dim; ++c) dw[c] += static_cast<T>(sum[static_cast<size_t>(c)]);
}

template void RmsNormForward<float>(const float*, const float*, int64_t, int64_t, double, float*, float*);
template void RmsNormForward<double>(const double*, const double*, int64_t, int64_t, double, double*, double*);
template void RmsNormBackward<float>(const float*, const float*, const float*, const float*, int64_t, int64_t,
                                     float*, float*);
template void RmsNormBackward<double>(const double*, const double*, const double*, const double*, int64_t, int64_t,
                                      double*, double*);

}  // namespace posenc
