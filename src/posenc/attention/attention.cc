#include "posenc/attention/attention.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "posenc/kernels/key_blocks.h"
#include "posenc/attention/softmax_scale.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/attention_kernels.h"

namespace posenc {
namespace {

// Query rows per AttendTile call: a key chunk loaded into L1 serves all of them (and all their heads).
constexpr int64_t kTileRows = 16;
// The same for pre-rotation rows, which take every KV head in one call (their tables are the large stream).
constexpr int64_t kPreRotationTileRows = 8;


// Every kv head of n tokens in key blocks (attention_kernels.h), into a reused buffer.
void Pack(const float* src, int64_t stride, int64_t n, int64_t n_kv_heads, int64_t head_dim,
          std::vector<float>& dst) {
  dst.resize(static_cast<size_t>(n_kv_heads * kernels::NumKeyBlocks(n) * kernels::kKeyBlock * head_dim));
  kernels::PackKeyBlocks(src, stride, n, n_kv_heads, head_dim, dst.data());
}

}  // namespace

void ValidateScoreOptions(const ScoreOptions& o) {
  if (o.window < 0) throw ConfigError(fmt::format("attention window must be >= 0, got {}", o.window));
  if (!std::isfinite(o.softcap) || o.softcap < 0) {
    throw ConfigError(fmt::format("attention softcap must be finite and >= 0, got {}", o.softcap));
  }
}

void ValidateAttentionDims(const AttentionDims& d) {
  if (d.n_heads <= 0) throw ShapeError(fmt::format("attention n_heads must be > 0, got {}", d.n_heads));
  if (d.n_kv_heads <= 0) throw ShapeError(fmt::format("attention n_kv_heads must be > 0, got {}", d.n_kv_heads));
  if (d.head_dim <= 0) throw ShapeError(fmt::format("attention head_dim must be > 0, got {}", d.head_dim));
  if (d.n_heads % d.n_kv_heads != 0) {
    throw ShapeError(fmt::format("attention n_heads ({}) must be a multiple of n_kv_heads ({})", d.n_heads,
                                 d.n_kv_heads));
  }
}

void ValidateAttentionCall(const AttentionDims& dims, const AttentionInputs& in, const float* out,
                           int64_t out_stride, const char* name) {
  const int64_t q_row = dims.n_heads * dims.head_dim;
  const int64_t kv_row = dims.n_kv_heads * dims.head_dim;
  if (in.n_q < 0 || in.n_k < 0) {
    throw ShapeError(fmt::format("{}: n_q and n_k must be >= 0, got {} and {}", name, in.n_q, in.n_k));
  }
  if (in.n_q == 0) return;
  for (const auto& [ptr, what] : {std::pair<const float*, const char*>{in.q, "q"}, {in.k, "k"}, {in.v, "v"},
                                  {out, "out"}}) {
    if (ptr == nullptr) throw ShapeError(fmt::format("{}: {} is null for n_q = {}", name, what, in.n_q));
  }
  if (in.q_stride < q_row) {
    throw ShapeError(fmt::format("{}: q_stride must be >= n_heads * head_dim = {}, got {}", name, q_row,
                                 in.q_stride));
  }
  if (in.kv_stride < kv_row) {
    throw ShapeError(fmt::format("{}: kv_stride must be >= n_kv_heads * head_dim = {}, got {}", name, kv_row,
                                 in.kv_stride));
  }
  if (out_stride < q_row) {
    throw ShapeError(fmt::format("{}: out_stride must be >= n_heads * head_dim = {}, got {}", name, q_row,
                                 out_stride));
  }
  if (in.q_pos0 < 0) throw RangeError(fmt::format("{}: q_pos0 must be >= 0, got {}", name, in.q_pos0));
  if (in.q_pos0 + in.n_q > in.n_k) {
    throw RangeError(fmt::format("{}: query position {} needs keys [0, {}], but n_k = {}", name,
                                 in.q_pos0 + in.n_q - 1, in.q_pos0 + in.n_q - 1, in.n_k));
  }
}

void CausalAttention(const AttentionDims& dims, const AttentionInputs& in, float softmax_scale_multiplier,
                     float* out, int64_t out_stride, AttentionScratch& scratch, const ScoreOptions& options) {
  ValidateAttentionDims(dims);
  ValidateScoreOptions(options);
  ValidateAttentionCall(dims, in, out, out_stride, "CausalAttention");
  if (in.n_q == 0) return;
  const int64_t hd = dims.head_dim;
  const int64_t kv_mul = dims.n_heads / dims.n_kv_heads;
  const int64_t n_k = in.n_k;
  const float scale =
      static_cast<float>(SoftmaxScale(hd, options.query_pre_attn_scalar, softmax_scale_multiplier));
  Pack(in.k, in.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb);
  Pack(in.v, in.kv_stride, n_k, dims.n_kv_heads, hd, scratch.vb);
  const int64_t head_size = kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock * hd;  // one kv head's blocks
  for (int64_t g = 0; g < dims.n_kv_heads; ++g) {  // one kv head at a time: its keys and values stay cached
    for (int64_t i0 = 0; i0 < in.n_q; i0 += kTileRows) {
      // query heads [g * kv_mul, (g + 1) * kv_mul) read kv head g; they are contiguous in q and out
      kernels::AttendTileArgs a{};
      a.q = in.q + i0 * in.q_stride + g * kv_mul * hd;
      a.q_stride = in.q_stride;
      a.n_rows = std::min(kTileRows, in.n_q - i0);
      a.pos0 = in.q_pos0 + i0;
      a.kv_mul = kv_mul;
      a.head_dim = hd;
      a.kb = scratch.kb.data() + g * head_size;
      a.vb = scratch.vb.data() + g * head_size;
      a.scale = scale;
      a.window = options.window;
      a.softcap = static_cast<float>(options.softcap);
      a.out = out + i0 * out_stride + g * kv_mul * hd;
      a.out_stride = out_stride;
      kernels::AttendTile(a);
    }
  }
}

void CausalAttentionPreRotation(const AttentionDims& dims, const AttentionInputs& rotated,
                                const AttentionInputs& raw, const PreRotationTables& tables,
                                float softmax_scale_multiplier, float* out, int64_t out_stride,
                                AttentionScratch& scratch, const ScoreOptions& options) {
  ValidateAttentionDims(dims);
  ValidateScoreOptions(options);
  ValidateAttentionCall(dims, rotated, out, out_stride, "CausalAttentionPreRotation (rotated)");
  ValidateAttentionCall(dims, raw, out, out_stride, "CausalAttentionPreRotation (raw)");
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
  bool all_shared = true;
  for (int64_t i = 0; i < rotated.n_q && all_shared; ++i) all_shared = tables.shared(rotated.q_pos0 + i);
  if (all_shared) {  // every row uses the static rotation: exactly CausalAttention on the rotated inputs
    CausalAttention(dims, rotated, softmax_scale_multiplier, out, out_stride, scratch, options);
    return;
  }
  const int64_t kv_mul = dims.n_heads / dims.n_kv_heads;
  const int64_t n_k = rotated.n_k;
  const float scale =
      static_cast<float>(SoftmaxScale(hd, options.query_pre_attn_scalar, softmax_scale_multiplier));
  // kb: statically rotated keys (shared rows); kb_raw: unrotated keys (pre-rotation rows); vb: values.
  Pack(rotated.k, rotated.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb);
  Pack(raw.k, raw.kv_stride, n_k, dims.n_kv_heads, hd, scratch.kb_raw);
  Pack(rotated.v, rotated.kv_stride, n_k, dims.n_kv_heads, hd, scratch.vb);
  const int64_t head_size = kernels::NumKeyBlocks(n_k) * kernels::kKeyBlock * hd;
  scratch.q_rot.resize(static_cast<size_t>(kPreRotationTileRows * dims.n_heads * hd));
  scratch.cs.resize(static_cast<size_t>(kPreRotationTileRows));
  float* q_rot = scratch.q_rot.data();
  for (int64_t i0 = 0; i0 < rotated.n_q;) {
    // A tile: consecutive rows that all use the static rotation (up to kTileRows, one KV head per call) or all
    // their own tables (up to kPreRotationTileRows, every KV head in one call: a row's table is read once).
    const bool shared = tables.shared(rotated.q_pos0 + i0);
    const int64_t max_rows = shared ? kTileRows : kPreRotationTileRows;
    int64_t n_rows = 1;
    while (n_rows < max_rows && i0 + n_rows < rotated.n_q && tables.shared(rotated.q_pos0 + i0 + n_rows) == shared) {
      ++n_rows;
    }
    kernels::AttendTileArgs a{};
    a.n_rows = n_rows;
    a.pos0 = rotated.q_pos0 + i0;
    a.kv_mul = kv_mul;
    a.head_dim = hd;
    a.scale = scale;
    a.window = options.window;
    a.softcap = static_cast<float>(options.softcap);
    a.out_stride = out_stride;
    if (shared) {
      for (int64_t g = 0; g < dims.n_kv_heads; ++g) {
        a.q = rotated.q + i0 * rotated.q_stride + g * kv_mul * hd;
        a.q_stride = rotated.q_stride;
        a.kb = scratch.kb.data() + g * head_size;
        a.vb = scratch.vb.data() + g * head_size;
        a.out = out + i0 * out_stride + g * kv_mul * hd;
        kernels::AttendTile(a);
      }
    } else {
      // q' = R(p theta_p) q for every head, with each row's own angle for its position p.
      for (int64_t t = 0; t < n_rows; ++t) {
        const int64_t p = a.pos0 + t;
        for (int64_t h = 0; h < dims.n_heads; ++h) {
          const float* qr = raw.q + (i0 + t) * raw.q_stride + h * hd;
          float* qo = q_rot + (t * dims.n_heads + h) * hd;
          for (int64_t k = 0; k < half; ++k) {
            const float cp = tables.at(p, 0, k, p), sp = tables.at(p, 1, k, p);
            qo[2 * k] = qr[2 * k] * cp - qr[2 * k + 1] * sp;
            qo[2 * k + 1] = qr[2 * k] * sp + qr[2 * k + 1] * cp;
          }
          for (int64_t d = 2 * half; d < hd; ++d) qo[d] = qr[d];
        }
        scratch.cs[static_cast<size_t>(t)] = tables.row(p);
      }
      a.q = q_rot;
      a.q_stride = dims.n_heads * hd;
      a.n_groups = dims.n_kv_heads;
      a.group_stride = head_size;
      a.kb = scratch.kb_raw.data();
      a.vb = scratch.vb.data();
      a.out = out + i0 * out_stride;
      a.cs = scratch.cs.data();
      a.half = half;
      kernels::AttendTile(a);
    }
    i0 += n_rows;
  }
}

}  // namespace posenc
