// Key-block packing for the attention kernels: see key_blocks.h.
#include "posenc/kernels/key_blocks.h"

namespace posenc::kernels {

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

void UnpackKeyBlocksAdd(const float* src, int64_t n, int64_t head_dim, float* dst, int64_t stride) {
  for (int64_t j = 0; j < n; ++j) {
    const float* in = src + (j / kKeyBlock) * head_dim * kKeyBlock + j % kKeyBlock;
    float* out = dst + j * stride;
    for (int64_t d = 0; d < head_dim; ++d) out[d] += in[d * kKeyBlock];
  }
}

}  // namespace posenc::kernels
