// Scalar twins of the training kernels (train_kernels.h): the same formulas, one element at a time, expf.
#include <cmath>

#include "posenc/kernels/train_kernels.h"

namespace posenc::kernels {
namespace {

float Sigmoid(float a) {
  const float t = std::exp(-std::fabs(a));
  return (a >= 0.0f ? 1.0f : t) / (1.0f + t);
}

}  // namespace

void SwiGluForwardRowScalar(const float* gate, const float* up, int64_t n, float* h) {
  for (int64_t i = 0; i < n; ++i) h[i] = gate[i] * Sigmoid(gate[i]) * up[i];
}

void SwiGluBackwardRowScalar(const float* dh, const float* gate, const float* up, int64_t n, float* dgate,
                             float* dup) {
  for (int64_t i = 0; i < n; ++i) {
    const float a = gate[i], s = Sigmoid(a);
    dgate[i] += dh[i] * up[i] * (s * (1.0f + a * (1.0f - s)));
    dup[i] += dh[i] * (a * s);
  }
}

void SoftmaxScaleRowScalar(float* x, int64_t n, float lse, float scale) {
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - lse) * scale;
}

}  // namespace posenc::kernels
