#include "posenc/attention/attention_kernels.h"

#include <algorithm>
#include <limits>

#include "posenc/attention/simd8.h"

namespace posenc::kernels {
namespace {

using simd::F8;
using simd::I8;
using simd::Load;
using simd::Splat;
using simd::Store;

#define POSENC_INLINE POSENC_SIMD_INLINE

constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Lanes [0, valid) true.
POSENC_INLINE I8 FirstLanes(int64_t valid) {
  const I8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
  return lane < (I8{} + static_cast<int32_t>(valid));
}

// sum_d q[d] * k[d * 8 .. d * 8 + 8) over d < HD, as a balanced tree (short dependency chains).
template <int HD>
POSENC_INLINE F8 DotTree(const float* q, const float* k) {
  if constexpr (HD == 1) {
    return q[0] * Load(k);
  } else {
    return DotTree<HD / 2>(q, k) + DotTree<HD - HD / 2>(q + HD / 2, k + (HD / 2) * kKeyBlock);
  }
}

// Dot product of q with the 8 keys of one block (channel stride 8). HD > 0: head_dim known at compile time.
template <int HD>
POSENC_INLINE F8 DotBlock(const float* q, const float* k, int64_t hd) {
  if constexpr (HD > 0) {
    return DotTree<HD>(q, k);
  } else {
    F8 acc = q[0] * Load(k);
    for (int64_t d = 1; d < hd; ++d) acc += q[d] * Load(k + d * kKeyBlock);
    return acc;
  }
}

// The same with each key rotated pairwise first: c, sn [half, 8] cos/sin of the block's keys.
POSENC_INLINE F8 DotBlockRotatingKeys(const float* q, const float* k, int64_t hd, int64_t half, const float* c,
                                      const float* sn) {
  F8 acc = Splat(0.0f);
  for (int64_t i = 0; i < half; ++i) {
    const F8 ka = Load(k + (2 * i) * kKeyBlock), kb = Load(k + (2 * i + 1) * kKeyBlock);
    const F8 ci = Load(c + i * kKeyBlock), si = Load(sn + i * kKeyBlock);
    // q . R k with R k = (ka c - kb s, ka s + kb c)
    acc += q[2 * i] * (ka * ci - kb * si) + q[2 * i + 1] * (ka * si + kb * ci);
  }
  for (int64_t d = 2 * half; d < hd; ++d) acc += q[d] * Load(k + d * kKeyBlock);
  return acc;
}

// Scales a block of scores, masks lanes past the last key with -inf, stores it and folds it into the max.
POSENC_INLINE void StoreScores(F8 acc, float scale, int64_t b, int64_t n, float* s, F8& mv) {
  acc *= scale;
  if ((b + 1) * kKeyBlock > n) acc = FirstLanes(n - b * kKeyBlock) ? acc : Splat(kMinusInf);
  Store(s + b * kKeyBlock, acc);
  mv = acc > mv ? acc : mv;
}

// out[d] = sum_j e_j v_j[d] / sum_j e_j with e_j = exp(s_j - m), j < n, for d < HD (compile-time size: the
// HD accumulators stay in registers). The exponentials are formed on the fly, never stored.
template <int HD>
POSENC_INLINE void SoftmaxWeightedSumT(const float* s, float m, const float* vb, int64_t n, float* out) {
  const F8 mm = Splat(m);
  F8 acc[HD];
#pragma GCC unroll 16
  for (int d = 0; d < HD; ++d) acc[d] = Splat(0.0f);
  F8 sv = Splat(0.0f);
  const int64_t nb = NumKeyBlocks(n);
  for (int64_t b = 0; b < nb; ++b) {
    F8 e = simd::Exp8<true>(Load(s + b * kKeyBlock) - mm);
    if ((b + 1) * kKeyBlock > n) e = FirstLanes(n - b * kKeyBlock) ? e : Splat(0.0f);
    sv += e;
    const float* v = vb + b * HD * kKeyBlock;
#pragma GCC unroll 16
    for (int d = 0; d < HD; ++d) acc[d] += e * Load(v + d * kKeyBlock);
  }
  const float inv = 1.0f / simd::HSum(sv);
#pragma GCC unroll 16
  for (int d = 0; d < HD; ++d) out[d] = simd::HSum(acc[d]) * inv;
}

// The same for a head_dim known only at run time: exponentials stored in s, then one dot product per channel.
POSENC_INLINE void SoftmaxWeightedSum(float* s, float m, const float* vb, int64_t n, int64_t hd, float* out) {
  const F8 mm = Splat(m);
  F8 sv = Splat(0.0f);
  const int64_t nb = NumKeyBlocks(n);
  for (int64_t b = 0; b < nb; ++b) {
    F8 e = simd::Exp8<true>(Load(s + b * kKeyBlock) - mm);
    if ((b + 1) * kKeyBlock > n) e = FirstLanes(n - b * kKeyBlock) ? e : Splat(0.0f);
    Store(s + b * kKeyBlock, e);
    sv += e;
  }
  const float inv = 1.0f / simd::HSum(sv);
  for (int64_t d = 0; d < hd; ++d) {
    F8 acc = Splat(0.0f);
    for (int64_t b = 0; b < nb; ++b) acc += Load(s + b * kKeyBlock) * Load(vb + (b * hd + d) * kKeyBlock);
    out[d] = simd::HSum(acc) * inv;
  }
}

template <int HD>
POSENC_INLINE void SoftmaxThenValues(float* s, float m, const float* vb, int64_t n, int64_t hd, float* out) {
  if constexpr (HD > 0) {
    SoftmaxWeightedSumT<HD>(s, m, vb, n, out);
  } else {
    SoftmaxWeightedSum(s, m, vb, n, hd, out);
  }
}

template <int HD>
POSENC_INLINE void AttendRowT(const float* q, int64_t kv_mul, const float* kb, const float* vb, int64_t n,
                              int64_t head_dim, float scale, float* scores, float* out) {
  const int64_t nb = NumKeyBlocks(n);
  for (int64_t r = 0; r < kv_mul; ++r) {
    const float* qr = q + r * head_dim;
    float* s = scores + r * nb * kKeyBlock;
    F8 mv = Splat(kMinusInf);
    for (int64_t b = 0; b < nb; ++b) StoreScores(DotBlock<HD>(qr, kb + b * head_dim * kKeyBlock, head_dim), scale, b,
                                                 n, s, mv);
    SoftmaxThenValues<HD>(s, simd::HMax(mv), vb, n, head_dim, out + r * head_dim);
  }
}

template <int HD>
POSENC_INLINE void AttendRowRotatingKeysT(const float* q, int64_t kv_mul, const float* kb, const float* vb,
                                          int64_t n, int64_t head_dim, int64_t half, const float* cs, float scale,
                                          float* scores, float* out) {
  const int64_t nb = NumKeyBlocks(n);
  if constexpr (HD > 0) {
    // Each key block is rotated once (into rk, L1-resident) and shared by the kv_mul query heads.
    constexpr int kMaxGroup = 16;
    F8 mv[kMaxGroup];
    for (int64_t r0 = 0; r0 < kv_mul; r0 += kMaxGroup) {
      const int64_t group = std::min<int64_t>(kMaxGroup, kv_mul - r0);
      for (int64_t r = 0; r < group; ++r) mv[r] = Splat(kMinusInf);
      alignas(32) float rk[HD * kKeyBlock];
      for (int64_t b = 0; b < nb; ++b) {
        const float* k = kb + b * HD * kKeyBlock;
        const float* c = cs + b * 2 * half * kKeyBlock;
        const float* sn = c + half * kKeyBlock;
        for (int64_t i = 0; i < half; ++i) {
          const F8 ka = Load(k + (2 * i) * kKeyBlock), kb2 = Load(k + (2 * i + 1) * kKeyBlock);
          const F8 ci = Load(c + i * kKeyBlock), si = Load(sn + i * kKeyBlock);
          Store(rk + (2 * i) * kKeyBlock, ka * ci - kb2 * si);  // R k = (ka c - kb s, ka s + kb c)
          Store(rk + (2 * i + 1) * kKeyBlock, ka * si + kb2 * ci);
        }
        for (int64_t d = 2 * half; d < HD; ++d) Store(rk + d * kKeyBlock, Load(k + d * kKeyBlock));
        for (int64_t r = 0; r < group; ++r) {
          StoreScores(DotTree<HD>(q + (r0 + r) * HD, rk), scale, b, n, scores + (r0 + r) * nb * kKeyBlock, mv[r]);
        }
      }
      for (int64_t r = 0; r < group; ++r) {
        SoftmaxThenValues<HD>(scores + (r0 + r) * nb * kKeyBlock, simd::HMax(mv[r]), vb, n, head_dim,
                              out + (r0 + r) * head_dim);
      }
    }
  } else {
    for (int64_t r = 0; r < kv_mul; ++r) {
      const float* qr = q + r * head_dim;
      float* s = scores + r * nb * kKeyBlock;
      F8 mv = Splat(kMinusInf);
      for (int64_t b = 0; b < nb; ++b) {
        const float* c = cs + b * 2 * half * kKeyBlock;
        StoreScores(DotBlockRotatingKeys(qr, kb + b * head_dim * kKeyBlock, head_dim, half, c, c + half * kKeyBlock),
                    scale, b, n, s, mv);
      }
      SoftmaxThenValues<HD>(s, simd::HMax(mv), vb, n, head_dim, out + r * head_dim);
    }
  }
}

}  // namespace

void PackKeyBlocks(const float* src, int64_t stride, int64_t n, int64_t n_kv_heads, int64_t head_dim, float* dst) {
  const int64_t nb = NumKeyBlocks(n);
  const int64_t head_size = nb * head_dim * kKeyBlock;  // one kv head's blocks
  for (int64_t j = 0; j < nb * kKeyBlock; ++j) {
    const int64_t b = j / kKeyBlock, l = j % kKeyBlock;
    for (int64_t g = 0; g < n_kv_heads; ++g) {
      float* out = dst + g * head_size + b * head_dim * kKeyBlock + l;
      const float* in = src + j * stride + g * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) out[d * kKeyBlock] = j < n ? in[d] : 0.0f;
    }
  }
}

__attribute__((target_clones("avx2", "default"))) void AttendRow(const float* q, int64_t kv_mul, const float* kb,
                                                                 const float* vb, int64_t n, int64_t head_dim,
                                                                 float scale, float* scores, float* out) {
  switch (head_dim) {  // common small head sizes: unrolled dot products, value accumulators in registers
    case 8: return AttendRowT<8>(q, kv_mul, kb, vb, n, head_dim, scale, scores, out);
    case 16: return AttendRowT<16>(q, kv_mul, kb, vb, n, head_dim, scale, scores, out);
    default: return AttendRowT<0>(q, kv_mul, kb, vb, n, head_dim, scale, scores, out);
  }
}

__attribute__((target_clones("avx2", "default"))) void AttendRowRotatingKeys(
    const float* q, int64_t kv_mul, const float* kb, const float* vb, int64_t n, int64_t head_dim, int64_t half,
    const float* cs, float scale, float* scores, float* out) {
  switch (head_dim) {
    case 8: return AttendRowRotatingKeysT<8>(q, kv_mul, kb, vb, n, head_dim, half, cs, scale, scores, out);
    case 16: return AttendRowRotatingKeysT<16>(q, kv_mul, kb, vb, n, head_dim, half, cs, scale, scores, out);
    default: return AttendRowRotatingKeysT<0>(q, kv_mul, kb, vb, n, head_dim, half, cs, scale, scores, out);
  }
}

}  // namespace posenc::kernels
