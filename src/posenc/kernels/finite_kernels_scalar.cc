// FirstNonFiniteScalar: the plain reference for the Highway FirstNonFinite (finite_kernels.cc).
#include <cmath>

#include "posenc/kernels/finite_kernels.h"

namespace posenc::kernels {

int64_t FirstNonFiniteScalar(const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

}  // namespace posenc::kernels
