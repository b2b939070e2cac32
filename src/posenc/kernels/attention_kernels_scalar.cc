// AttendTileScalar and AttendTileBackwardScalar: the plain references for the Highway AttendTile and
// AttendTileBackward (attention_kernels.cc), written in the order of the definition, one head-row at a time.
#include <algorithm>
#include <cmath>
#include <vector>

#include "posenc/kernels/exp_kernel.h"
#include "posenc/kernels/attention_kernels.h"

namespace posenc::kernels {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;

// Key j of a key-block array, channels into k[0, hd); with a pre-rotation table c (a row's [nb, 2, half, 8]),
// rotated by it: (x, y) -> (x c - y s, x s + y c) per interleaved pair.
void LoadKey(const float* kb, int64_t hd, int64_t j, const float* c, int64_t half, float* k) {
  const float* kj = kb + (j / 8) * hd * 8 + j % 8;
  for (int64_t d = 0; d < hd; ++d) k[d] = kj[d * 8];
  if (c == nullptr) return;
  const float* cj = c + (j / 8) * 2 * half * 8 + j % 8;
  for (int64_t p = 0; p < half; ++p) {
    const float x = k[2 * p], y = k[2 * p + 1], cp = cj[p * 8], sp = cj[(half + p) * 8];
    k[2 * p] = x * cp - y * sp;
    k[2 * p + 1] = x * sp + y * cp;
  }
}

}  // namespace

void AttendTileScalar(const AttendTileArgs& a) {
  const int64_t hd = a.head_dim;
  std::vector<float> k(static_cast<size_t>(hd)), s;
  for (int64_t i = 0; i < a.n_rows; ++i) {
    const int64_t n = a.pos0 + i + 1;  // keys [lo, n)
    const int64_t lo = a.window > 0 ? std::max<int64_t>(0, n - a.window) : 0;
    s.assign(static_cast<size_t>(n), 0.0f);
    for (int64_t h = 0; h < a.n_groups * a.kv_mul; ++h) {
      const float* kb = a.kb + (h / a.kv_mul) * a.group_stride;
      const float* vb = a.vb + (h / a.kv_mul) * a.group_stride;
      const float* q = a.q + i * a.q_stride + h * hd;
      float m = 0.0f;
      for (int64_t j = lo; j < n; ++j) {
        LoadKey(kb, hd, j, a.cs != nullptr ? a.cs[i] : nullptr, a.half, k.data());  // R(j theta_p) k_j if cs
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[static_cast<size_t>(d)];
        float score = dot * a.scale;
        if (a.softcap > 0.0f) score = a.softcap * std::tanh(score / a.softcap);
        s[static_cast<size_t>(j)] = score;
        m = j == lo ? score : std::max(m, score);
      }
      float sum = 0.0f;
      for (int64_t j = lo; j < n; ++j) sum += (s[static_cast<size_t>(j)] = ExpF32(s[static_cast<size_t>(j)] - m));
      if (a.lse != nullptr) a.lse[i * a.lse_stride + h] = (m + std::log(sum)) * kLog2e;
      float* out = a.out + i * a.out_stride + h * hd;
      for (int64_t d = 0; d < hd; ++d) {
        float acc = 0.0f;
        for (int64_t j = lo; j < n; ++j) acc += s[static_cast<size_t>(j)] * vb[(j / 8) * hd * 8 + d * 8 + j % 8];
        out[d] = acc / sum;
      }
    }
  }
}

void AttendTileBackwardScalar(const AttendTileBackwardArgs& a) {
  const int64_t hd = a.head_dim;
  std::vector<float> k(static_cast<size_t>(hd)), g(static_cast<size_t>(hd));
  for (int64_t i = 0; i < a.n_rows; ++i) {
    const int64_t n = a.pos0 + i + 1;  // keys [0, n)
    const float* c = a.cs != nullptr ? a.cs[i] : nullptr;
    for (int64_t h = 0; h < a.kv_mul; ++h) {
      const float* q = a.q + i * a.q_stride + h * hd;
      const float* o = a.out + i * a.out_stride + h * hd;
      const float* dout = a.dout + i * a.dout_stride + h * hd;
      float* dq = a.dq + i * a.dq_stride + h * hd;
      const float lse = a.lse[i * a.lse_stride + h] * kLn2;
      float dsum = 0.0f;
      for (int64_t d = 0; d < hd; ++d) dsum += dout[d] * o[d];
      for (int64_t j = 0; j < n; ++j) {
        LoadKey(a.kb, hd, j, c, a.half, k.data());
        const float* vj = a.vb + (j / 8) * hd * 8 + j % 8;
        float dot = 0.0f, dp = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[d];
        for (int64_t d = 0; d < hd; ++d) dp += dout[d] * vj[d * 8];
        const float p = ExpF32(dot * a.scale - lse);
        const float ds = p * (dp - dsum) * a.scale;
        float* dvj = a.dvb + (j / 8) * hd * 8 + j % 8;
        float* dkj = a.dkb + (j / 8) * hd * 8 + j % 8;
        for (int64_t d = 0; d < hd; ++d) {
          dvj[d * 8] += p * dout[d];
          dq[d] += ds * k[d];
          g[d] = ds * q[d];
        }
        if (c != nullptr) {  // R^T: back to the raw key's frame
          const float* cj = c + (j / 8) * 2 * a.half * 8 + j % 8;
          for (int64_t p2 = 0; p2 < a.half; ++p2) {
            const float x = g[2 * p2], y = g[2 * p2 + 1], cp = cj[p2 * 8], sp = cj[(a.half + p2) * 8];
            g[2 * p2] = x * cp + y * sp;
            g[2 * p2 + 1] = y * cp - x * sp;
          }
        }
        for (int64_t d = 0; d < hd; ++d) dkj[d * 8] += g[d];
      }
    }
  }
}

}  // namespace posenc::kernels
