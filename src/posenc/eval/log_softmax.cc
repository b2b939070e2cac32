#include "posenc/eval/log_softmax.h"

#include <cmath>

#include "posenc/kernels/simd8.h"

namespace posenc {

__attribute__((target_clones("avx2", "default"))) double LogSumExp(const float* logits, int64_t n) {
  using simd::D4;
  float mf = logits[0];
  for (int64_t i = 1; i < n; ++i) mf = logits[i] > mf ? logits[i] : mf;
  const double m = mf;
  D4 acc = simd::SplatD(0.0);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const D4 z = {static_cast<double>(logits[i]), static_cast<double>(logits[i + 1]),
                  static_cast<double>(logits[i + 2]), static_cast<double>(logits[i + 3])};
    acc += simd::ExpD4(z - m);
  }
  double sum = simd::HSumD(acc);
  for (; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - m);
  return m + std::log(sum);
}

}  // namespace posenc
