// SwiGLU layer: see swiglu.h.
#include "posenc/model/layers/swiglu.h"

#include <fmt/format.h>

#include <cmath>
#include <initializer_list>
#include <type_traits>

#include "posenc/core/errors.h"
#include "posenc/kernels/train_kernels.h"
#include "posenc/model/layers/parallel.h"

namespace posenc {
namespace {

constexpr int64_t kMinRows = 64;

inline double Sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }

void Check(const char* name, int64_t n, int64_t hidden, std::initializer_list<const void*> pointers) {
  if (n < 0 || hidden < 1) {
    throw ShapeError(fmt::format("{}: n must be >= 0 and hidden >= 1, got {} and {}", name, n, hidden));
  }
  if (n == 0) return;
  for (const void* p : pointers) {
    if (p == nullptr) throw ShapeError(fmt::format("{}: null input or output pointer for n = {}", name, n));
  }
}

}  // namespace

template <typename T>
void SwiGluForward(const T* gate_up, int64_t n, int64_t hidden, T* h) {
  // gate_up [n, 2 hidden] -> h [n, hidden]
  Check("SwiGluForward", n, hidden, {gate_up, h});
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* g = gate_up + r * 2 * hidden;
      const T* u = g + hidden;
      T* hr = h + r * hidden;
      if constexpr (std::is_same_v<T, float>) {
        kernels::SwiGluForwardRow(g, u, hidden, hr);
      } else {
        for (int64_t c = 0; c < hidden; ++c) hr[c] = g[c] * Sigmoid(g[c]) * u[c];
      }
    }
  });
}

template <typename T>
void SwiGluBackward(const T* dh, const T* gate_up, int64_t n, int64_t hidden, T* dgate_up) {
  // dh [n, hidden], gate_up [n, 2 hidden]; dgate_up [n, 2 hidden] +=
  Check("SwiGluBackward", n, hidden, {dh, gate_up, dgate_up});
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* g = gate_up + r * 2 * hidden;
      const T* u = g + hidden;
      const T* d = dh + r * hidden;
      T* dg = dgate_up + r * 2 * hidden;
      T* du = dg + hidden;
      if constexpr (std::is_same_v<T, float>) {
        kernels::SwiGluBackwardRow(d, g, u, hidden, dg, du);
        continue;
      }
      for (int64_t c = 0; c < hidden; ++c) {
        const T s = Sigmoid(g[c]);
        dg[c] += d[c] * u[c] * (s * (T{1} + g[c] * (T{1} - s)));
        du[c] += d[c] * (g[c] * s);
      }
    }
  });
}

template void SwiGluForward<float>(const float*, int64_t, int64_t, float*);
template void SwiGluForward<double>(const double*, int64_t, int64_t, double*);
template void SwiGluBackward<float>(const float*, const float*, int64_t, int64_t, float*);
template void SwiGluBackward<double>(const double*, const double*, int64_t, int64_t, double*);

}  // namespace posenc
