// SwiGluScalar: the plain reference for the Highway SwiGlu (swiglu_kernels.cc).
#include "posenc/kernels/exp_kernel.h"
#include "posenc/kernels/swiglu_kernels.h"

namespace posenc::kernels {

void SwiGluScalar(float* hb, const float* hb2, int64_t n) {
  for (int64_t i = 0; i < n; ++i) hb[i] = hb[i] * (1.0f / (1.0f + ExpF32(-hb[i]))) * hb2[i];
}

}  // namespace posenc::kernels
