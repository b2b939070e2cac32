#include "posenc/attention/attention.h"


#include <fmt/format.h>

#include "posenc/attention/attention_kernels.h"
#include "posenc/attention/softmax_scale.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

void CheckInputs(const AttentionDims& dims, const AttentionInputs& in, const char* name) {
  const int64_t q_row = dims.n_heads * dims.head_dim;
  const int64_t kv_row = dims.n_kv_heads * dims.head_dim;
  if (in.n_q < 0 || in.n_k < 0) {
    throw ShapeError(fmt::format("{}: n_q and n_k must be >= 0, got {} and {}", name, in.n_q, in.n_k));
  }
  if (in.n_q == 0) return;
  if (in.q == nullptr || in.k == nullptr || in.v == nullptr) throw ShapeError(fmt::format("{}: null q/k/v", name));
  if (in.q_stride < q_row) {
    throw ShapeError(fmt::format("{}: q_stride must be >= n_heads * head_dim = {}, got {}", name, q_row,
                                 in.q_stride));
  }
  if (in.kv_stride < kv_row) {
    throw ShapeError(fmt::format("{}: kv_stride must be >= n_kv_heads * head_dim = {}, got {}", name, kv_row,
                                 in.kv_stride));
  }
  if (in.q_pos0 < 0) throw RangeError(fmt::format("{}: q_pos0 must be >= 0, got {}", name, in.q_pos0));
  if (in.q_pos0 + in.n_q > in.n_k) {
    throw RangeError(fmt::format("{}: query position {} needs keys [0, {}], but n_k = {}", name,
                                 in.q_pos0 + in.n_q - 1, in.q_pos0 + in.n_q - 1, in.n_k));
  }
}

// Every kv head of n tokens in key blocks (attention_kernels.h), into a reused buffer.
void Pack(const float* src, int64_t stride, int64_t n, int64_t n_kv_heads, int64_t head_dim,
          std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(n_kv_heads * kernels::NumKeyBlocks(n) * kernels::kKeyBlock * head_dim));
  kernels::PackKeyBlocks(src, stride, n, n_kv_heads, head_dim, dst.data());
}

}  // namespace

void ValidateAttentionDims(const AttentionDims& d) {
  if (d.n_heads <= 0) throw ShapeError(fmt::format("attention n_heads must be > 0, got {}", d.n_heads));
  if (d.n_kv_heads <= 0) throw ShapeError(fmt::format("attention n_kv_heads must be > 0, got {}", d.n_kv_heads));
  if (d.head_dim <= 0) throw ShapeError(fmt::format("attention head_dim must be > 0, got {}", d.head_dim));
  if (d.n_heads % d.n_kv_heads != 0) {
    throw ShapeError(fmt::format("attention n_heads ({}) must be a multiple of n_kv_heads ({})", d.n_heads,
                                 d.n_kv_heads));
  }
}

void CausalAttention(const AttentionDims& dims, const AttentionInputs& in, float softmax_scale_multiplier,
                     float* out, int64_t out_stride, AttentionScratch& scratch) {
  ValidateAttentionDims(dims);
  CheckInputs(dims, in, "CausalAttention");
  if (in.n_q == 0) return;
  if (out_stride < dims.n_heads * dims.head_dim) {
    throw ShapeError(fmt::format("CausalAttention: out_stride must be >= {}, got {}", dims.n_heads * dims.head_dim,
                                 out_stride));
  }
  const int64_t hd = dims.head_dim;
  const int64_t kv_mul = dims.n_heads / dims.n_kv_heads;
  const int64_t n_k = in.n_k;
  const float scale = static_cast<float>(SoftmaxScale(hd, std::nullopt, softmax_scale_multiplier));
  Pack(in.k, in.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb);
  Pack(in.v, in.kv_stride, n_k, dims.n_kv_heads, hd, scratch.vb);
  const int64_t head_size = kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock * hd;  // one kv head's blocks
  scratch.scores.resize(static_cast<size_t>(kv_mul * kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock));
  for (int64_t g = 0; g < dims.n_kv_heads; ++g) {  // one kv head at a time: its keys and values stay cached
    const float* kb = scratch.kb.data() + g * head_size;
    const float* vb = scratch.vb.data() + g * head_size;
    for (int64_t i = 0; i < in.n_q; ++i) {
      // query heads [g * kv_mul, (g + 1) * kv_mul) read kv head g; they are contiguous in q and out
      kernels::AttendRow(in.q + i * in.q_stride + g * kv_mul * hd, kv_mul, kb, vb, in.q_pos0 + i + 1, hd, scale,
                         scratch.scores.data(), out + i * out_stride + g * kv_mul * hd);
    }
  }
}

void CausalAttentionPreRotation(const AttentionDims& dims, const AttentionInputs& rotated,
                                const AttentionInputs& raw, const PreRotationTables& tables,
                                float softmax_scale_multiplier, float* out, int64_t out_stride,
                                AttentionScratch& scratch) {
  ValidateAttentionDims(dims);
  CheckInputs(dims, rotated, "CausalAttentionPreRotation (rotated)");
  CheckInputs(dims, raw, "CausalAttentionPreRotation (raw)");
  if (rotated.n_q != raw.n_q || rotated.q_pos0 != raw.q_pos0 || rotated.n_k != raw.n_k) {
    throw ShapeError(fmt::format(
        "CausalAttentionPreRotation: rotated and raw inputs differ (n_q {} vs {}, q_pos0 {} vs {}, n_k {} vs {})",
        rotated.n_q, raw.n_q, rotated.q_pos0, raw.q_pos0, rotated.n_k, raw.n_k));
  }
  if (rotated.n_q == 0) return;
  const int64_t hd = dims.head_dim;
  const int64_t half = tables.half();
  if (2 * half > hd) {
    throw ShapeError(fmt::format("CausalAttentionPreRotation: rotary_dim = {} must be <= head_dim = {}", 2 * half,
                                 hd));
  }
  if (rotated.q_pos0 + rotated.n_q > tables.n_rows()) {
    throw RangeError(fmt::format("CausalAttentionPreRotation: query position {} is outside the tables [0, {})",
                                 rotated.q_pos0 + rotated.n_q - 1, tables.n_rows()));
  }
  if (out_stride < dims.n_heads * hd) {
    throw ShapeError(fmt::format("CausalAttentionPreRotation: out_stride must be >= {}, got {}",
                                 dims.n_heads * hd, out_stride));
  }
  const int64_t kv_mul = dims.n_heads / dims.n_kv_heads;
  const int64_t n_k = rotated.n_k;
  const float scale = static_cast<float>(SoftmaxScale(hd, std::nullopt, softmax_scale_multiplier));
  // kb: statically rotated keys (shared rows); kb_raw: unrotated keys (pre-rotation rows); vb: values.
  Pack(rotated.k, rotated.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb);
  Pack(raw.k, raw.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb_raw);
  Pack(rotated.v, rotated.kv_stride, n_k, dims.n_kv_heads, hd, scratch.vb);
  const int64_t head_size = kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock * hd;
  scratch.scores.resize(static_cast<size_t>(kv_mul * kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock));
  scratch.q_rot.resize(static_cast<size_t>(kv_mul * hd));
  float* q_rot = scratch.q_rot.data();
  // Row-major order: a pre-rotation row's cos/sin table (64 KB at p = 2047 for head_dim 8) is
  // read once for all kv heads while it is in cache; over all rows the tables are tens of MB.
  for (int64_t i = 0; i < rotated.n_q; ++i) {
    const int64_t p = rotated.q_pos0 + i;
    for (int64_t g = 0; g < dims.n_kv_heads; ++g) {
      const float* kb = scratch.kb.data() + g * head_size;
      const float* kb_raw = scratch.kb_raw.data() + g * head_size;
      const float* vb = scratch.vb.data() + g * head_size;
      float* o = out + i * out_stride + g * kv_mul * hd;
      if (tables.shared(p)) {
        kernels::AttendRow(rotated.q + i * rotated.q_stride + g * kv_mul * hd, kv_mul, kb, vb, p + 1, hd, scale,
                           scratch.scores.data(), o);
        continue;
      }
      // q' = R(p theta_p) q for the group's heads, with the row's own angle for position p.
      const float* q = raw.q + i * raw.q_stride + g * kv_mul * hd;
      for (int64_t r = 0; r < kv_mul; ++r) {
        const float* qr = q + r * hd;
        float* qo = q_rot + r * hd;
        for (int64_t k = 0; k < half; ++k) {
          const float cp = tables.at(p, 0, k, p), sp = tables.at(p, 1, k, p);
          qo[2 * k] = qr[2 * k] * cp - qr[2 * k + 1] * sp;
          qo[2 * k + 1] = qr[2 * k] * sp + qr[2 * k + 1] * cp;
        }
        for (int64_t d = 2 * half; d < hd; ++d) qo[d] = qr[d];
      }
      kernels::AttendRowRotatingKeys(q_rot, kv_mul, kb_raw, vb, p + 1, hd, half, tables.row(p), scale,
                                     scratch.scores.data(), o);
    }
  }
}

}  // namespace posenc
