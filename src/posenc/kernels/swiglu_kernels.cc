// Highway SwiGLU kernel (SwiGlu): compiled once per x86 target by foreach_target.h, picked at run time. Each
// lane repeats ExpF32 (kernels/exp_kernel.h) operation for operation, with separate multiplies and adds
// (never MulAdd), so every target gives SwiGluScalar's bits.
#include "posenc/kernels/swiglu_kernels.h"

#include "posenc/kernels/exp_kernel.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/swiglu_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// ExpF32, lane by lane: clamp, n = round(x / ln2) by the 1.5 * 2^23 shift, Cody-Waite reduction, Cephes
// polynomial, times 2^n from the exponent bits. The clamps are written as Max/Min with the constant second,
// which keeps ExpF32's result for every non-NaN x (a NaN x only reaches the final product through hb).
template <class D>
HWY_INLINE hn::Vec<D> ExpF32Lanes(D d, hn::Vec<D> x) {
  using namespace exp_constants;
  const hn::RebindToSigned<D> di;
  x = hn::Max(x, hn::Set(d, kMinArg));
  x = hn::Min(x, hn::Set(d, kMaxArg));
  const auto shifted = hn::Add(hn::Mul(x, hn::Set(d, kLog2e)), hn::Set(d, kRoundShift));
  const auto n = hn::Sub(hn::BitCast(di, shifted), hn::Set(di, kRoundShiftBits));
  const auto fn = hn::Sub(shifted, hn::Set(d, kRoundShift));
  auto r = hn::Sub(x, hn::Mul(fn, hn::Set(d, kLn2Hi)));
  r = hn::Sub(r, hn::Mul(fn, hn::Set(d, kLn2Lo)));
  auto p = hn::Set(d, kP0);
  p = hn::Add(hn::Mul(p, r), hn::Set(d, kP1));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, kP2));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, kP3));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, kP4));
  p = hn::Add(hn::Mul(p, r), hn::Set(d, kP5));
  p = hn::Add(hn::Add(hn::Mul(p, hn::Mul(r, r)), r), hn::Set(d, 1.0f));
  const auto scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(n, hn::Set(di, 127))));
  return hn::Mul(p, scale);
}

void SwiGluImpl(float* HWY_RESTRICT hb, const float* HWY_RESTRICT hb2, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(d, 1.0f);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto h = hn::LoadU(d, hb + i);
    const auto sigmoid = hn::Div(one, hn::Add(one, ExpF32Lanes(d, hn::Neg(h))));
    hn::StoreU(hn::Mul(hn::Mul(h, sigmoid), hn::LoadU(d, hb2 + i)), d, hb + i);
  }
  kernels::SwiGluScalar(hb + i, hb2 + i, n - i);  // tail: the reference's operations, the same bits
}

int64_t SwiGluTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(SwiGluImpl);
HWY_EXPORT(SwiGluTargetImpl);

namespace kernels {

void SwiGlu(float* hb, const float* hb2, int64_t n) {
  if (n > 0) HWY_DYNAMIC_DISPATCH(SwiGluImpl)(hb, hb2, n);
}

const char* SwiGluTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(SwiGluTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
