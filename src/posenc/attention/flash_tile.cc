#include "posenc/attention/flash_tile.h"

#include <algorithm>
#include <limits>

#include "posenc/blas/gemm.h"
#include "posenc/kernels/flash_kernels.h"
#include "posenc/rope/apply.h"

namespace posenc {

void FlashLoadQueries(const float* src, int64_t src_stride, int64_t kv_mul, int64_t nb, int64_t head_dim,
                      const CosSinView& table, std::span<const int64_t> rows, RopeLayout layout, float scale,
                      float* dst) {
  const int64_t hd = head_dim;
  if (table.cos == nullptr) {
    for (int64_t hh = 0; hh < kv_mul; ++hh) {
      for (int64_t ii = 0; ii < nb; ++ii) std::copy_n(src + ii * src_stride + hh * hd, hd, dst + (hh * nb + ii) * hd);
    }
  } else {
    const HeadsView in{const_cast<float*>(src), DType::kF32, nb, kv_mul, hd, src_stride, hd};
    const HeadsView out{dst, DType::kF32, nb, kv_mul, hd, hd, nb * hd};
    ApplyRope(in, out, rows.first(static_cast<size_t>(nb)), table, layout);
  }
  for (int64_t x = 0; x < kv_mul * nb * hd; ++x) dst[x] *= scale;
}

void FlashResetRows(const FlashRows& st) {
  std::fill_n(st.o, st.rows * st.head_dim, 0.0f);
  std::fill_n(st.m, st.rows, -std::numeric_limits<float>::infinity());
  std::fill_n(st.l, st.rows, 0.0f);
}

void FlashAccumulate(const FlashRows& st, const float* k, int64_t k_stride, const float* v, int64_t v_stride,
                     const int64_t* n_visible) {
  const int64_t rows = st.rows, hd = st.head_dim, lds = st.k_block;
  const int64_t k_end = rows > 0 ? *std::max_element(n_visible, n_visible + rows) : 0;
  for (int64_t j0 = 0; j0 < k_end; j0 += st.k_block) {
    const int64_t cols = std::min(st.k_block, k_end - j0);
    GemmNT(rows, cols, hd, st.q, hd, k + j0 * k_stride, k_stride, st.s, lds);
    for (int64_t r = 0; r < rows; ++r) st.valid[r] = std::clamp<int64_t>(n_visible[r] - j0, 0, cols);
    kernels::FlashSoftmaxTile(st.s, lds, rows, cols, st.valid, st.m, st.l, st.corr);
    kernels::FlashScaleRows(st.o, hd, rows, hd, st.corr);
    GemmNN(rows, hd, cols, st.s, lds, v + j0 * v_stride, v_stride, st.o, hd, 1.0f);
  }
}

void FlashFinishRows(const FlashRows& st, int64_t kv_mul, int64_t nb, float* out, int64_t out_stride) {
  const int64_t hd = st.head_dim;
  for (int64_t hh = 0; hh < kv_mul; ++hh) {
    for (int64_t ii = 0; ii < nb; ++ii) {
      const int64_t r = hh * nb + ii;
      const float l = st.l[r];  // >= 1: the row's maximum contributes exp(0) = 1
      const float* src = st.o + r * hd;
      float* dst = out + ii * out_stride + hh * hd;
      for (int64_t c = 0; c < hd; ++c) dst[c] = src[c] / l;
    }
  }
}

}  // namespace posenc
