// Highway kernels of the tiled attention (FlashSoftmaxTile, FlashScaleRows), compiled once per x86 target by
// foreach_target.h and picked at run time; scalar twins and the dispatchers at the bottom (HWY_ONCE).
//
// Tails: a row's last valid % Lanes keys go through one padded local vector (zeros past the end), so every
// weight, including the tail's, comes from the same vector Exp; padding lanes never enter the max or the sum.
#include "posenc/kernels/flash_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/flash_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/contrib/math/math-inl.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

void FlashSoftmaxTileImpl(float* HWY_RESTRICT s, int64_t lds, int64_t rows, int64_t cols,
                          const int64_t* HWY_RESTRICT valid, float* HWY_RESTRICT m, float* HWY_RESTRICT l,
                          float* HWY_RESTRICT corr) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  HWY_ALIGN float tail[hn::MaxLanes(d)];
  for (int64_t r = 0; r < rows; ++r) {
    float* HWY_RESTRICT row = s + r * lds;
    const int64_t n = valid[r];
    const int64_t n_vec = n - n % N;
    // Row maximum over the unmasked keys, together with the running maximum.
    auto vmax = hn::Set(d, kNegInf);
    for (int64_t j = 0; j < n_vec; j += N) vmax = hn::Max(vmax, hn::LoadU(d, row + j));
    // No full vector: -inf, not MaxOfLanes of the -inf splat (Highway 1.0.3's EMU128 target, which clang builds,
    // starts its reduction at the lowest finite float and would return -FLT_MAX).
    float mx = n_vec > 0 ? hn::GetLane(hn::MaxOfLanes(d, vmax)) : kNegInf;
    for (int64_t j = n_vec; j < n; ++j) mx = std::max(mx, row[j]);
    mx = std::max(mx, m[r]);
    corr[r] = m[r] == kNegInf ? 0.0f : std::exp(m[r] - mx);
    // p_j = exp(s_j - m'), summed in lanes.
    const auto vm = hn::Set(d, mx);
    auto vsum = hn::Zero(d);
    for (int64_t j = 0; j < n_vec; j += N) {
      const auto p = hn::Exp(d, hn::Sub(hn::LoadU(d, row + j), vm));
      hn::StoreU(p, d, row + j);
      vsum = hn::Add(vsum, p);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, vsum));
    if (n_vec < n) {
      const int64_t t = n - n_vec;
      for (int64_t j = 0; j < N; ++j) tail[j] = j < t ? row[n_vec + j] : mx;  // padding: exp(0) = 1, not summed
      const auto p = hn::Exp(d, hn::Sub(hn::Load(d, tail), vm));
      hn::Store(p, d, tail);
      for (int64_t j = 0; j < t; ++j) {
        row[n_vec + j] = tail[j];
        sum += tail[j];
      }
    }
    for (int64_t j = n; j < cols; ++j) row[j] = 0.0f;  // masked keys (above the diagonal) weigh nothing
    l[r] = l[r] * corr[r] + sum;
    m[r] = mx;
  }
}

void FlashScaleRowsImpl(float* HWY_RESTRICT o, int64_t ldo, int64_t rows, int64_t cols, const float* HWY_RESTRICT f) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < rows; ++r) {
    if (f[r] == 1.0f) continue;
    float* HWY_RESTRICT row = o + r * ldo;
    const auto vf = hn::Set(d, f[r]);
    int64_t c = 0;
    for (; c + N <= cols; c += N) hn::StoreU(hn::Mul(hn::LoadU(d, row + c), vf), d, row + c);
    for (; c < cols; ++c) row[c] *= f[r];
  }
}

int64_t FlashTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(FlashSoftmaxTileImpl);
HWY_EXPORT(FlashScaleRowsImpl);
HWY_EXPORT(FlashTargetImpl);

namespace kernels {

void FlashSoftmaxTile(float* s, int64_t lds, int64_t rows, int64_t cols, const int64_t* valid, float* m, float* l,
                      float* corr) {
  HWY_DYNAMIC_DISPATCH(FlashSoftmaxTileImpl)(s, lds, rows, cols, valid, m, l, corr);
}

void FlashSoftmaxTileScalar(float* s, int64_t lds, int64_t rows, int64_t cols, const int64_t* valid, float* m,
                            float* l, float* corr) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    float* row = s + r * lds;
    const int64_t n = valid[r];
    float mx = m[r];
    for (int64_t j = 0; j < n; ++j) mx = std::max(mx, row[j]);
    corr[r] = m[r] == kNegInf ? 0.0f : std::exp(m[r] - mx);
    float sum = 0.0f;
    for (int64_t j = 0; j < n; ++j) {
      row[j] = std::exp(row[j] - mx);
      sum += row[j];
    }
    for (int64_t j = n; j < cols; ++j) row[j] = 0.0f;
    l[r] = l[r] * corr[r] + sum;
    m[r] = mx;
  }
}

void FlashScaleRows(float* o, int64_t ldo, int64_t rows, int64_t cols, const float* f) {
  HWY_DYNAMIC_DISPATCH(FlashScaleRowsImpl)(o, ldo, rows, cols, f);
}

const char* FlashKernelTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(FlashTargetImpl)()); }

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
