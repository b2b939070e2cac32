// KV cache for incremental decoding, with keys cached rotated (HF, llama.cpp) or unrotated (pre-rotation).
#pragma once

#include <cstdint>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"

namespace posenc {

/// What the key cache holds.
///   kRotated:   R(theta_j, j) k_j, rotated once with the table of the step that produced it (HF's
///               DynamicCache, llama.cpp). A later change of scaling leaves old keys as they were, unless
///               RerotateKeys is called.
///   kUnrotated: raw k_j; every step rotates all cached keys with that step's table, so a changed scaling
///               (dynamic NTK) applies to old keys too: "pre-rotation" (YaRN paper Sec. 3.3).
enum class KvCacheMode { kRotated, kUnrotated };

/// "rotated" or "unrotated".
const char* KvCacheModeName(KvCacheMode mode);

/// Keys and values of positions [0, length) of one sequence, for every layer.
class KvCache {
 public:
  /// Errors: ShapeError naming the field if n_layers, max_seq_len, n_kv_heads or head_dim is <= 0.
  KvCache(KvCacheMode mode, int64_t n_layers, int64_t max_seq_len, int64_t n_kv_heads, int64_t head_dim);

  /// Writes slot `pos` of `layer`: k and v are [n_kv_heads, head_dim] (k as the mode says: rotated or raw), the
  /// token's position id `position` (its RoPE position; -1: the slot index). Slots are written in order
  /// (pos <= length()); length() becomes pos + 1, so writing an earlier slot forgets every later one. A decode
  /// step stores the same slot and position in every layer.
  /// Errors: RangeError if layer is outside [0, n_layers), pos > length(), pos >= max_seq_len or position < -1.
  void Store(int64_t layer, int64_t pos, const float* k, const float* v, int64_t position = -1);
  /// Position id of every slot [0, length()).
  const std::vector<int64_t>& positions() const { return positions_; }

  KvCacheMode mode() const { return mode_; }
  int64_t n_layers() const { return n_layers_; }
  int64_t max_seq_len() const { return max_seq_len_; }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  int64_t kv_dim() const { return n_kv_heads_ * head_dim_; }
  int64_t length() const { return length_; }
  /// Start of layer `layer`'s keys: [max_seq_len, kv_dim], rows [0, length()) valid.
  float* keys(int64_t layer) { return key_cache_.data() + layer * max_seq_len_ * kv_dim(); }
  const float* keys(int64_t layer) const { return key_cache_.data() + layer * max_seq_len_ * kv_dim(); }
  /// Start of layer `layer`'s values: [max_seq_len, kv_dim].
  const float* values(int64_t layer) const { return value_cache_.data() + layer * max_seq_len_ * kv_dim(); }

 private:
  KvCacheMode mode_;
  int64_t n_layers_, max_seq_len_, n_kv_heads_, head_dim_;
  int64_t length_ = 0;
  std::vector<float> key_cache_;    // [n_layers, max_seq_len, kv_dim]
  std::vector<float> value_cache_;  // [n_layers, max_seq_len, kv_dim]
  std::vector<int64_t> positions_;  // [length]: position id of each slot
};

/// One decode step's attention for `layer`: query q (slot pos = cache.length() - 1 after Store, already
/// rotated at its position) attends to cached slots [0, pos] (within options.window of it). A kRotated cache is
/// used as it is; a kUnrotated cache has each key rotated with the table row of its slot's position id first (in
/// scratch; the cache keeps the raw keys), so `table` must be the frequencies current at this step; an empty
/// table (cos == nullptr: a layer without RoPE) uses the stored keys as they are.
///
/// Shapes:  q [n_heads, head_dim]; out [n_heads, head_dim]; table [> every cached position, half] for kUnrotated.
/// Errors:  ShapeError if dims disagree with the cache (n_kv_heads, head_dim); RangeError if pos is outside
///          [0, cache.length()) or a table row is missing; as CausalAttention.
/// Source:  llama2.c run.c `forward` (attention over the cache); YaRN paper Sec. 3.3 for kUnrotated.
void AttendToCache(const AttentionDims& dims, const KvCache& cache, int64_t layer, int64_t pos, const float* q,
                   const CosSinView& table, RopeLayout layout, float softmax_scale_multiplier, float* out,
                   AttentionScratch& scratch, const ScoreOptions& options = {});

/// Re-rotates every cached key of a kRotated cache from the table it was rotated with to another one:
/// k_j <- R_to(p_j) R_from(p_j)^-1 k_j for slots j in [0, length) at position ids p_j, every layer (ApplyRope kInverse on `from`, then
/// kForward on `to`; kInverse also undoes a folded attention_factor). Afterwards the cache equals one built
/// with `to` from the start, up to float32 rounding (a few ulp per key channel).
///
/// Shapes:  from, to [> every cached position, half] (row p = position p).
/// Errors:  ConfigError if the cache is kUnrotated (its keys are raw; they are rotated at use);
///          RangeError if a table has fewer than length rows; ShapeError if half does not fit head_dim.
/// Source:  YaRN paper Sec. 3.3 (re-rotating cached keys when the scale changes).
void RerotateKeys(KvCache& cache, const CosSinView& from, const CosSinView& to, RopeLayout layout);

}  // namespace posenc
