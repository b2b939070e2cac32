// AttendTileScalar: the plain reference for the Highway AttendTile (attention_kernels.cc), written in the order
// of the definition, one head-row at a time, two passes over all its keys.
#include <algorithm>
#include <vector>

#include "posenc/kernels/exp_kernel.h"
#include "posenc/kernels/attention_kernels.h"

namespace posenc::kernels {

void AttendTileScalar(const AttendTileArgs& a) {
  const int64_t hd = a.head_dim;
  std::vector<float> k(static_cast<size_t>(hd)), s;
  for (int64_t i = 0; i < a.n_rows; ++i) {
    const int64_t n = a.pos0 + i + 1;  // keys [0, n)
    s.resize(static_cast<size_t>(n));
    for (int64_t h = 0; h < a.n_groups * a.kv_mul; ++h) {
      const float* kb = a.kb + (h / a.kv_mul) * a.group_stride;
      const float* vb = a.vb + (h / a.kv_mul) * a.group_stride;
      const float* q = a.q + i * a.q_stride + h * hd;
      float m = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        const float* kj = kb + (j / 8) * hd * 8 + j % 8;  // key j, channel stride 8
        for (int64_t d = 0; d < hd; ++d) k[static_cast<size_t>(d)] = kj[d * 8];
        if (a.cs != nullptr && a.cs[i] != nullptr) {  // pre-rotation: R(j theta_p) k_j
          const float* c = a.cs[i] + (j / 8) * 2 * a.half * 8 + j % 8;
          for (int64_t p = 0; p < a.half; ++p) {
            const float x = k[2 * p], y = k[2 * p + 1], cp = c[p * 8], sp = c[(a.half + p) * 8];
            k[2 * p] = x * cp - y * sp;
            k[2 * p + 1] = x * sp + y * cp;
          }
        }
        float dot = 0.0f;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * k[static_cast<size_t>(d)];
        s[static_cast<size_t>(j)] = dot * a.scale;
        m = j == 0 ? s[0] : std::max(m, s[static_cast<size_t>(j)]);
      }
      float sum = 0.0f;
      for (float& x : s) sum += (x = ExpF32(x - m));
      float* out = a.out + i * a.out_stride + h * hd;
      for (int64_t d = 0; d < hd; ++d) {
        float acc = 0.0f;
        for (int64_t j = 0; j < n; ++j) acc += s[static_cast<size_t>(j)] * vb[(j / 8) * hd * 8 + d * 8 + j % 8];
        out[d] = acc / sum;
      }
    }
  }
}

}  // namespace posenc::kernels
