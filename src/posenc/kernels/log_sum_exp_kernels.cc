// Highway LogSumExp: compiled once per x86 target by foreach_target.h, picked at run time. Pass 1: float32
// maximum. Pass 2: float32 logits widened to float64 lanes (PromoteTo), ExpF64 lane by lane with the scalar
// operations in the same order (Mul then Add, never MulAdd), summed per lane; the tail is a zero-padded
// vector whose padding lanes are zeroed after the exponential.
#include "posenc/kernels/log_sum_exp_kernels.h"

#include <cmath>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/log_sum_exp_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

template <class D>
HWY_INLINE hn::Vec<D> ExpF64Lanes(D d, hn::Vec<D> x) {
  const hn::RebindToSigned<D> di;
  const auto shift = hn::Set(d, 6755399441055744.0);
  x = hn::Max(x, hn::Set(d, -708.0));
  const auto shifted = hn::Add(hn::Mul(x, hn::Set(d, 1.4426950408889634073599)), shift);
  const auto k = hn::Sub(hn::BitCast(di, shifted), hn::BitCast(di, shift));
  const auto fk = hn::Sub(shifted, shift);
  auto r = hn::Sub(x, hn::Mul(fk, hn::Set(d, 6.93145751953125e-1)));
  r = hn::Sub(r, hn::Mul(fk, hn::Set(d, 1.42860682030941723212e-6)));
  const auto rr = hn::Mul(r, r);
  auto p = hn::Set(d, 1.26177193074810590878e-4);
  p = hn::Add(hn::Mul(p, rr), hn::Set(d, 3.02994407707441961300e-2));
  p = hn::Add(hn::Mul(p, rr), hn::Set(d, 9.99999999999999999910e-1));
  p = hn::Mul(p, r);
  auto q = hn::Set(d, 3.00198505138664455042e-6);
  q = hn::Add(hn::Mul(q, rr), hn::Set(d, 2.52448340349684104192e-3));
  q = hn::Add(hn::Mul(q, rr), hn::Set(d, 2.27265548208155028766e-1));
  q = hn::Add(hn::Mul(q, rr), hn::Set(d, 2.00000000000000000009e0));
  const auto e = hn::Add(hn::Set(d, 1.0), hn::Mul(hn::Set(d, 2.0), hn::Div(p, hn::Sub(q, p))));
  const auto scale = hn::BitCast(d, hn::ShiftLeft<52>(hn::Add(k, hn::Set(di, 1023))));
  return hn::Mul(e, scale);
}

double LogSumExpImpl(const float* HWY_RESTRICT logits, int64_t n) {
  const hn::ScalableTag<double> d;
  const hn::Rebind<float, decltype(d)> df;  // as many float lanes as d has double lanes
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  float mf = logits[0];
  for (int64_t i = 1; i < n; ++i) mf = logits[i] > mf ? logits[i] : mf;
  const auto m = hn::Set(d, static_cast<double>(mf));
  auto acc = hn::Zero(d);
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    acc = hn::Add(acc, ExpF64Lanes(d, hn::Sub(hn::PromoteTo(d, hn::LoadU(df, logits + i)), m)));
  }
  if (i < n) {
    HWY_ALIGN float tail[hn::MaxLanes(d)] = {};
    for (int64_t j = 0; j < n - i; ++j) tail[j] = logits[i + j];
    const auto e = ExpF64Lanes(d, hn::Sub(hn::PromoteTo(d, hn::Load(df, tail)), m));
    acc = hn::Add(acc, hn::IfThenElseZero(hn::FirstN(d, static_cast<size_t>(n - i)), e));
  }
  const double sum = hn::GetLane(hn::SumOfLanes(d, acc));
  return static_cast<double>(mf) + std::log(sum);
}

int64_t LogSumExpTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(LogSumExpImpl);
HWY_EXPORT(LogSumExpTargetImpl);

namespace kernels {

double LogSumExp(const float* logits, int64_t n) { return HWY_DYNAMIC_DISPATCH(LogSumExpImpl)(logits, n); }

const char* LogSumExpTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(LogSumExpTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
