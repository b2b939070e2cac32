#include "posenc/kernels/targets.h"

#include <hwy/targets.h>

#include <cstdint>

#include "posenc/kernels/flash_kernels.h"

namespace posenc::kernels {

KernelTargets GetKernelTargets() {
  KernelTargets t;
  const int64_t supported = hwy::SupportedTargets();
  // Highway numbers its targets so that a lower bit is a better target: walk the bits from the lowest.
  for (int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
    const int64_t target = bits & -bits;
    t.compiled.emplace_back(hwy::TargetName(target));
    if ((supported & target) != 0) t.usable.emplace_back(hwy::TargetName(target));
  }
  t.dispatched = FlashKernelTargetName();
  return t;
}

}  // namespace posenc::kernels
