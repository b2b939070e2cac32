#include "posenc/attention/kv_cache.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

const char* KvCacheModeName(KvCacheMode mode) { return mode == KvCacheMode::kRotated ? "rotated" : "unrotated"; }

KvCache::KvCache(KvCacheMode mode, int64_t n_layers, int64_t max_seq_len, int64_t n_kv_heads, int64_t head_dim)
    : mode_(mode), n_layers_(n_layers), max_seq_len_(max_seq_len), n_kv_heads_(n_kv_heads), head_dim_(head_dim) {
  auto positive = [](const char* field, int64_t v) {
    if (v <= 0) throw ShapeError(fmt::format("KvCache {} must be > 0, got {}", field, v));
  };
  positive("n_layers", n_layers);
  positive("max_seq_len", max_seq_len);
  positive("n_kv_heads", n_kv_heads);
  positive("head_dim", head_dim);
  key_cache_.assign(static_cast<size_t>(n_layers * max_seq_len * kv_dim()), 0.0f);
  value_cache_.assign(key_cache_.size(), 0.0f);
}

void KvCache::Store(int64_t layer, int64_t pos, const float* k, const float* v, int64_t position) {
  if (layer < 0 || layer >= n_layers_) {
    throw RangeError(fmt::format("KvCache::Store: layer must be in [0, {}), got {}", n_layers_, layer));
  }
  if (pos < 0 || pos > length_ || pos >= max_seq_len_) {
    throw RangeError(fmt::format("KvCache::Store: pos must be in [0, min(length + 1 = {}, max_seq_len = {})), got {}",
                                 length_ + 1, max_seq_len_, pos));
  }
  if (position < -1) throw RangeError(fmt::format("KvCache::Store: position must be >= 0 (or -1), got {}", position));
  const int64_t off = (layer * max_seq_len_ + pos) * kv_dim();
  std::copy(k, k + kv_dim(), key_cache_.begin() + off);
  std::copy(v, v + kv_dim(), value_cache_.begin() + off);
  length_ = pos + 1;
  positions_.resize(static_cast<size_t>(length_));
  positions_[static_cast<size_t>(pos)] = position < 0 ? pos : position;
}

void AttendToCache(const AttentionDims& dims, const KvCache& cache, int64_t layer, int64_t pos, const float* q,
                   const CosSinView& table, RopeLayout layout, float softmax_scale_multiplier, float* out,
                   AttentionScratch& scratch, const ScoreOptions& options) {
  ValidateAttentionDims(dims);
  if (dims.n_kv_heads != cache.n_kv_heads() || dims.head_dim != cache.head_dim()) {
    throw ShapeError(fmt::format("AttendToCache: dims (n_kv_heads {}, head_dim {}) differ from the cache ({}, {})",
                                 dims.n_kv_heads, dims.head_dim, cache.n_kv_heads(), cache.head_dim()));
  }
  if (layer < 0 || layer >= cache.n_layers()) {
    throw RangeError(fmt::format("AttendToCache: layer must be in [0, {}), got {}", cache.n_layers(), layer));
  }
  if (pos < 0 || pos >= cache.length()) {
    throw RangeError(fmt::format("AttendToCache: pos must be in [0, length = {}), got {}", cache.length(), pos));
  }
  const int64_t kv_dim = cache.kv_dim();
  const float* keys = cache.keys(layer);
  std::vector<float> rotated;
  if (cache.mode() == KvCacheMode::kUnrotated && table.cos != nullptr) {
    // Pre-rotation: this step's table rotates every cached key j by row j (the cache keeps them raw).
    rotated.assign(keys, keys + (pos + 1) * kv_dim);
    const std::vector<int64_t> rows(cache.positions().begin(), cache.positions().begin() + pos + 1);
    ApplyRope(HeadsView::Contiguous(rotated.data(), pos + 1, dims.n_kv_heads, dims.head_dim), rows, table, layout,
              RopeDirection::kForward);
    keys = rotated.data();
  }
  AttentionInputs in;
  in.q = q;
  in.n_q = 1;
  in.q_stride = dims.n_heads * dims.head_dim;
  in.q_pos0 = pos;
  in.k = keys;
  in.v = cache.values(layer);
  in.n_k = pos + 1;
  in.kv_stride = kv_dim;
  CausalAttention(dims, in, softmax_scale_multiplier, out, dims.n_heads * dims.head_dim, scratch, options);
}

void RerotateKeys(KvCache& cache, const CosSinView& from, const CosSinView& to, RopeLayout layout) {
  if (cache.mode() != KvCacheMode::kRotated) {
    throw ConfigError("RerotateKeys: the cache mode is unrotated: its keys are raw and rotated at use");
  }
  const int64_t n = cache.length();
  if (n == 0) return;
  const std::vector<int64_t>& rows = cache.positions();
  for (int64_t l = 0; l < cache.n_layers(); ++l) {
    const HeadsView k = HeadsView::Contiguous(cache.keys(l), n, cache.n_kv_heads(), cache.head_dim());
    ApplyRope(k, rows, from, layout, RopeDirection::kInverse);
    ApplyRope(k, rows, to, layout, RopeDirection::kForward);
  }
}

}  // namespace posenc
