#include "posenc/model/swiglu.h"

#include "posenc/kernels/exp_kernel.h"
#include "posenc/kernels/simd8.h"

namespace posenc {

__attribute__((target_clones("avx2", "default"))) void SwiGluInPlace(float* hb, const float* hb2, int64_t n) {
  using simd::F8;
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const F8 h = simd::Load(hb + i);
    simd::Store(hb + i, h * (1.0f / (1.0f + simd::Exp8(-h))) * simd::Load(hb2 + i));
  }
  for (; i < n; ++i) hb[i] = hb[i] * (1.0f / (1.0f + ExpF32(-hb[i]))) * hb2[i];
}

}  // namespace posenc
