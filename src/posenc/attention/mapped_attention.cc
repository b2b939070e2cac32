#include "posenc/attention/mapped_attention.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "posenc/attention/softmax_scale.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr int64_t kQueryBlock = 64;

// Rotates n rows of `heads` heads (token stride `stride`, head_dim channels each) into `out` [n, heads,
// head_dim] (dense), row t at position pos[t], as RopePrecision::kExact forms the angles.
void RotateRows(const float* x, int64_t n, int64_t stride, int64_t heads, int64_t head_dim, const MappedRope& rope,
                const std::vector<double>& pos, std::vector<float>& out) {
  const int64_t row = heads * head_dim;
  out.resize(static_cast<size_t>(n * row));
  std::vector<float> c(static_cast<size_t>(rope.half)), s(static_cast<size_t>(rope.half));
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t k = 0; k < rope.half; ++k) {
      const double angle = static_cast<double>(rope.inv_freq[k]) * pos[static_cast<size_t>(t)];
      c[static_cast<size_t>(k)] = static_cast<float>(std::cos(angle) * rope.magnitude);
      s[static_cast<size_t>(k)] = static_cast<float>(std::sin(angle) * rope.magnitude);
    }
    for (int64_t h = 0; h < heads; ++h) {
      const float* in = x + t * stride + h * head_dim;
      float* o = out.data() + t * row + h * head_dim;
      std::copy(in, in + head_dim, o);
      for (int64_t k = 0; k < rope.half; ++k) {
        const int64_t ia = rope.layout == RopeLayout::kInterleaved ? 2 * k : k;
        const int64_t ib = rope.layout == RopeLayout::kInterleaved ? 2 * k + 1 : k + rope.half;
        const float a = in[ia], b = in[ib], ck = c[static_cast<size_t>(k)], sk = s[static_cast<size_t>(k)];
        o[ia] = a * ck - b * sk;
        o[ib] = a * sk + b * ck;
      }
    }
  }
}

}  // namespace

void MappedCausalAttention(const AttentionDims& dims, const AttentionInputs& in, std::span<const int64_t> positions,
                           const PositionMap& map, const MappedRope& rope, float softmax_scale_multiplier,
                           float* out, int64_t out_stride, const ScoreOptions& options) {
  ValidateAttentionDims(dims);
  ValidateAttentionCall(dims, in, out, out_stride, "MappedCausalAttention");
  ValidateScoreOptions(options);
  const int64_t n = in.n_q, hd = dims.head_dim;
  if (in.n_k != n || in.q_pos0 != 0) {
    throw ShapeError(fmt::format("MappedCausalAttention: queries and keys must be the same {} tokens from row 0, got "
                                 "n_k = {} and q_pos0 = {}", n, in.n_k, in.q_pos0));
  }
  if (static_cast<int64_t>(positions.size()) != n) {
    throw ShapeError(fmt::format("MappedCausalAttention: {} positions for {} tokens", positions.size(), n));
  }
  if (rope.half < 0 || 2 * rope.half > hd || (rope.half > 0 && rope.inv_freq == nullptr)) {
    throw ShapeError(fmt::format("MappedCausalAttention: rotary half {} must be in [0, head_dim/2 = {}] with its "
                                 "inv_freq given", rope.half, hd / 2));
  }
  for (int64_t t = 1; t < n; ++t) {
    if (positions[static_cast<size_t>(t)] < positions[static_cast<size_t>(t - 1)]) {
      throw RangeError(fmt::format("MappedCausalAttention: positions must not decrease, row {} is at {} after {}", t,
                                   positions[static_cast<size_t>(t)], positions[static_cast<size_t>(t - 1)]));
    }
  }
  const int n_sets = map.n_sets();
  if (n_sets < 1 || n_sets > PositionMap::kMaxSets) {
    throw ConfigError(fmt::format("position map {}: {} score sets, expected 1 to {}", map.name(), n_sets,
                                  PositionMap::kMaxSets));
  }
  if (n == 0) return;
  const float scale =
      static_cast<float>(SoftmaxScale(hd, options.query_pre_attn_scalar, softmax_scale_multiplier));

  // Which set scores each (query, key) pair: one byte per pair of the lower triangle's rows, shared by the heads.
  std::vector<int8_t> sel(static_cast<size_t>(n * n), -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t pi = positions[static_cast<size_t>(i)];
    for (int64_t j = 0; j <= i; ++j) {
      const int64_t pj = positions[static_cast<size_t>(j)];
      if (options.window > 0 && pi - pj >= options.window) continue;
      const int s = map.Select(pi, pj);
      if (s >= n_sets) {
        throw ConfigError(fmt::format("position map {} selected set {} of {}", map.name(), s, n_sets));
      }
      sel[static_cast<size_t>(i * n + j)] = static_cast<int8_t>(s);
    }
  }
  // Queries and keys rotated at each set's positions.
  std::vector<std::vector<float>> qs(static_cast<size_t>(n_sets)), ks(static_cast<size_t>(n_sets));
  std::vector<double> qpos(static_cast<size_t>(n)), kpos(static_cast<size_t>(n));
  for (int s = 0; s < n_sets; ++s) {
    for (int64_t t = 0; t < n; ++t) {
      qpos[static_cast<size_t>(t)] = map.QueryPosition(s, positions[static_cast<size_t>(t)]);
      kpos[static_cast<size_t>(t)] = map.KeyPosition(s, positions[static_cast<size_t>(t)]);
    }
    RotateRows(in.q, n, in.q_stride, dims.n_heads, hd, rope, qpos, qs[static_cast<size_t>(s)]);
    RotateRows(in.k, n, in.kv_stride, dims.n_kv_heads, hd, rope, kpos, ks[static_cast<size_t>(s)]);
  }
  const int64_t q_row = dims.n_heads * hd, kv_row = dims.n_kv_heads * hd;
  const int64_t group = dims.n_heads / dims.n_kv_heads;
  std::vector<float> scores(static_cast<size_t>(n_sets * kQueryBlock * n));
  std::vector<float> weights(static_cast<size_t>(kQueryBlock * n));
  for (int64_t h = 0; h < dims.n_heads; ++h) {
    const int64_t g = h / group;
    for (int64_t i0 = 0; i0 < n; i0 += kQueryBlock) {
      const int64_t b = std::min(kQueryBlock, n - i0), keys = i0 + b;  // keys [0, keys) cover the block's rows
      for (int s = 0; s < n_sets; ++s) {
        GemmNT(b, keys, hd, qs[static_cast<size_t>(s)].data() + i0 * q_row + h * hd, q_row,
               ks[static_cast<size_t>(s)].data() + g * hd, kv_row, scores.data() + s * kQueryBlock * n, n);
      }
      for (int64_t r = 0; r < b; ++r) {
        const int64_t i = i0 + r;
        float* w = weights.data() + r * keys;
        float max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          const int s = j <= i ? sel[static_cast<size_t>(i * n + j)] : -1;
          if (s < 0) {
            w[j] = -std::numeric_limits<float>::infinity();
            continue;
          }
          float x = scores[static_cast<size_t>(s * kQueryBlock * n + r * n + j)] * scale;
          if (options.softcap > 0) {
            const float cap = static_cast<float>(options.softcap);
            x = cap * std::tanh(x / cap);
          }
          w[j] = x;
          max = std::max(max, x);
        }
        // The query's own key is attended by every map (distance 0 is inside any window), so max is finite
        // unless a score is NaN; a row with no key would divide by zero below and is refused instead.
        if (!(max > -std::numeric_limits<float>::infinity())) {
          throw ConfigError(fmt::format("position map {}: the query at position {} attends to no key", map.name(),
                                        positions[static_cast<size_t>(i)]));
        }
        double sum = 0.0;
        for (int64_t j = 0; j < keys; ++j) {
          w[j] = w[j] == -std::numeric_limits<float>::infinity() ? 0.0f : std::exp(w[j] - max);
          sum += w[j];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t j = 0; j < keys; ++j) w[j] *= inv;
      }
      GemmNN(b, hd, keys, weights.data(), keys, in.v + g * hd, in.kv_stride, out + i0 * out_stride + h * hd,
             out_stride);
    }
  }
}

}  // namespace posenc
