// Highway kernels of the training layers (train_kernels.h), compiled once per x86 target by foreach_target.h and
// picked at run time; the dispatchers are at the bottom (HWY_ONCE). Scalar twins: train_kernels_scalar.cc.
#include "posenc/kernels/train_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/train_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// s = sigmoid(a) without overflow: t = exp(-|a|), s = (a >= 0 ? 1 : t) / (1 + t).
HWY_INLINE VF Sigmoid(DF d, VF a) {
  const VF t = hn::Exp(d, hn::Neg(hn::Abs(a)));
  const VF one = hn::Set(d, 1.0f);
  return hn::Div(hn::IfThenElse(hn::Ge(a, hn::Zero(d)), one, t), hn::Add(one, t));
}

// Calls body(offset, count) for full vectors of [0, n) and then once for the tail (count < Lanes), which the body
// handles through a padded local copy.
template <typename Body>
HWY_INLINE void Rows(DF d, int64_t n, Body&& body) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + N <= n; i += N) body(i, N);
  if (i < n) body(i, n - i);
}

// Loads count (<= Lanes) floats of p, padding with `pad`.
HWY_INLINE VF LoadPart(DF d, const float* p, int64_t count, float pad) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (count == N) return hn::LoadU(d, p);
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  for (int64_t j = 0; j < N; ++j) buf[j] = j < count ? p[j] : pad;
  return hn::Load(d, buf);
}

// Stores the first count (<= Lanes) lanes of v to p.
HWY_INLINE void StorePart(DF d, VF v, int64_t count, float* p) {
  if (count == static_cast<int64_t>(hn::Lanes(d))) {
    hn::StoreU(v, d, p);
    return;
  }
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  for (int64_t j = 0; j < count; ++j) p[j] = buf[j];
}

void SwiGluForwardImpl(const float* HWY_RESTRICT gate, const float* HWY_RESTRICT up, int64_t n,
                       float* HWY_RESTRICT h) {
  const DF d;
  Rows(d, n, [&](int64_t i, int64_t count) {
    const VF a = LoadPart(d, gate + i, count, 0.0f), b = LoadPart(d, up + i, count, 0.0f);
    StorePart(d, hn::Mul(hn::Mul(a, Sigmoid(d, a)), b), count, h + i);
  });
}

void SwiGluBackwardImpl(const float* HWY_RESTRICT dh, const float* HWY_RESTRICT gate, const float* HWY_RESTRICT up,
                        int64_t n, float* HWY_RESTRICT dgate, float* HWY_RESTRICT dup) {
  const DF d;
  const VF one = hn::Set(d, 1.0f);
  Rows(d, n, [&](int64_t i, int64_t count) {
    const VF a = LoadPart(d, gate + i, count, 0.0f), b = LoadPart(d, up + i, count, 0.0f);
    const VF g = LoadPart(d, dh + i, count, 0.0f);
    const VF s = Sigmoid(d, a);
    const VF dsilu = hn::Mul(s, hn::Add(one, hn::Mul(a, hn::Sub(one, s))));
    const VF dg = hn::Add(LoadPart(d, dgate + i, count, 0.0f), hn::Mul(hn::Mul(g, b), dsilu));
    const VF du = hn::Add(LoadPart(d, dup + i, count, 0.0f), hn::Mul(g, hn::Mul(a, s)));
    StorePart(d, dg, count, dgate + i);
    StorePart(d, du, count, dup + i);
  });
}

void SoftmaxScaleImpl(float* HWY_RESTRICT x, int64_t n, float lse, float scale) {
  const DF d;
  const VF vl = hn::Set(d, lse), vs = hn::Set(d, scale);
  Rows(d, n, [&](int64_t i, int64_t count) {
    StorePart(d, hn::Mul(hn::Exp(d, hn::Sub(LoadPart(d, x + i, count, lse), vl)), vs), count, x + i);
  });
}

const char* TrainTargetImpl() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(SwiGluForwardImpl);
HWY_EXPORT(SwiGluBackwardImpl);
HWY_EXPORT(SoftmaxScaleImpl);
HWY_EXPORT(TrainTargetImpl);

namespace kernels {

void SwiGluForwardRow(const float* gate, const float* up, int64_t n, float* h) {
  HWY_DYNAMIC_DISPATCH(SwiGluForwardImpl)(gate, up, n, h);
}
void SwiGluBackwardRow(const float* dh, const float* gate, const float* up, int64_t n, float* dgate, float* dup) {
  HWY_DYNAMIC_DISPATCH(SwiGluBackwardImpl)(dh, gate, up, n, dgate, dup);
}
void SoftmaxScaleRow(float* x, int64_t n, float lse, float scale) {
  HWY_DYNAMIC_DISPATCH(SoftmaxScaleImpl)(x, n, lse, scale);
}
const char* TrainKernelTargetName() { return HWY_DYNAMIC_DISPATCH(TrainTargetImpl)(); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
