// Highway FirstNonFinite: compiled once per x86 target by foreach_target.h, picked at run time. A vector whose
// lanes are not all finite is handed to the scalar reference to find the exact index.
#include "posenc/kernels/finite_kernels.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/finite_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

int64_t FirstNonFiniteImpl(const float* HWY_RESTRICT x, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  // Four vectors per test: the AND of their masks is one branch per 4 vectors on the all-finite path.
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const auto m0 = hn::IsFinite(hn::LoadU(d, x + i));
    const auto m1 = hn::IsFinite(hn::LoadU(d, x + i + lanes));
    const auto m2 = hn::IsFinite(hn::LoadU(d, x + i + 2 * lanes));
    const auto m3 = hn::IsFinite(hn::LoadU(d, x + i + 3 * lanes));
    if (!hn::AllTrue(d, hn::And(hn::And(m0, m1), hn::And(m2, m3)))) break;
  }
  for (; i + lanes <= n; i += lanes) {
    if (!hn::AllTrue(d, hn::IsFinite(hn::LoadU(d, x + i)))) break;
  }
  const int64_t rest = kernels::FirstNonFiniteScalar(x + i, n - i);
  return rest < 0 ? -1 : i + rest;
}

int64_t FiniteTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(FirstNonFiniteImpl);
HWY_EXPORT(FiniteTargetImpl);

namespace kernels {

int64_t FirstNonFinite(const float* x, int64_t n) {
  if (n <= 0) return -1;
  return HWY_DYNAMIC_DISPATCH(FirstNonFiniteImpl)(x, n);
}

const char* FiniteKernelTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(FiniteTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
