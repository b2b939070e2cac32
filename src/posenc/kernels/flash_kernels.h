// Inner loops of tiled (flash-style) attention that are not matrix products: the online-softmax update of one
// score tile and the rescaling of the output accumulator. Highway, compiled per target and picked at run time
// (flash_kernels.cc); scalar twins beside them are the references the tests compare against.
// Internal to posenc/attention/flash_attention.cc: no validation here (preconditions are stated and the caller
// checks every shape first); no exceptions, no allocation.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// Online-softmax update of one score tile (Milakov & Gimelshein 2018, "Online normalizer calculation for
/// softmax"; Dao et al. 2022, FlashAttention, Algorithm 1 lines 9-12), row by row.
///
/// Shapes:  s [rows, cols] row stride lds >= cols: scores of this tile (already scaled), overwritten with the
///          unnormalised weights p; valid [rows]: keys [0, valid[r]) of row r are unmasked (0 <= valid[r] <=
///          cols); m, l, corr [rows].
/// Math:    per row r, with n = valid[r]:
///            m' = max(m[r], max_{j<n} s[r][j]);  corr[r] = exp(m[r] - m')  (0 if m[r] = -inf);
///            p_j = exp(s[r][j] - m') for j < n, 0 for n <= j < cols;
///            l[r] = l[r] * corr[r] + sum_j p_j;   m[r] = m'.
///          The caller multiplies its output row by corr[r] before adding p V. Rows start at m = -inf, l = 0.
/// Precision: float32; exp within 1 ulp (Highway contrib Exp) in FlashSoftmaxTile, std::exp (glibc expf,
///          < 1 ulp) in the scalar twin; the sum is accumulated in lanes, then reduced (order differs from the
///          twin's sequential sum by at most gamma_cols * sum p). corr uses std::exp in both, so it is the same.
/// Preconditions: rows, cols >= 0; s finite for j < valid[r].
void FlashSoftmaxTile(float* s, int64_t lds, int64_t rows, int64_t cols, const int64_t* valid, float* m, float* l,
                      float* corr);
/// The scalar reference of FlashSoftmaxTile (same contract, sequential sum, std::exp).
void FlashSoftmaxTileScalar(float* s, int64_t lds, int64_t rows, int64_t cols, const int64_t* valid, float* m,
                            float* l, float* corr);

/// o[r][c] *= f[r] for c < cols; rows with f[r] == 1 are left untouched (exactly what the product would give).
/// Shapes: o [rows, cols] row stride ldo >= cols; f [rows]. Exact up to the one rounding of each product, so the
/// SIMD and scalar forms agree bit for bit.
void FlashScaleRows(float* o, int64_t ldo, int64_t rows, int64_t cols, const float* f);

/// Name of the Highway target FlashSoftmaxTile dispatches to on this CPU (e.g. "AVX2").
const char* FlashKernelTargetName();

}  // namespace posenc::kernels
