#include "posenc/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "posenc/attention/mapped_attention.h"
#include "posenc/core/errors.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/layout.h"

namespace posenc {
namespace {

NormWeights MakeNorm(const std::optional<NormTensors>& t, const std::string& src) {
  NormWeights n;
  if (!t) return n;
  n.w = MakeWeightVector(t->weight, src);
  if (t->plus_one) {
    for (float& w : n.w) w = 1.0f + w;  // Gemma2RMSNorm: output * (1.0 + weight), in float32
  }
  if (t->bias) n.b = MakeWeightVector(*t->bias, src);
  return n;
}

std::vector<float> MakeOptionalVector(const std::optional<TensorView>& t, const std::string& src) {
  return t ? MakeWeightVector(*t, src) : std::vector<float>();
}

WeightMatrix MakeOptionalMatrix(const std::optional<TensorView>& t, const std::string& src, WeightStorage storage,
                                ComputePath compute) {
  return t ? MakeWeightMatrix(*t, src, storage, compute) : WeightMatrix();
}

bool Consecutive(std::span<const int64_t> positions) {
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

void CheckTable(const LayerRope& r, int64_t layer, int64_t head_dim, int64_t max_position) {
  if (r.table.cos == nullptr) {
    if (r.pre_rotation != nullptr) {
      throw ShapeError(fmt::format("layer {}: pre-rotation tables need the layer's RoPE table", layer));
    }
    return;
  }
  if (r.table.half < 1 || 2 * r.table.half > head_dim) {
    throw ShapeError(fmt::format("layer {}: RoPE table rotary_dim = 2 * half = {} must be in [2, head_dim = {}]",
                                 layer, 2 * r.table.half, head_dim));
  }
  if (r.table.n_rows <= max_position) {
    throw RangeError(fmt::format("layer {}: the RoPE table has {} rows, position {} needs {}", layer, r.table.n_rows,
                                 max_position, max_position + 1));
  }
  if (r.pre_rotation != nullptr && r.pre_rotation->half() != r.table.half) {
    throw ShapeError(fmt::format("layer {}: pre-rotation tables have half = {}, the RoPE table {}", layer,
                                 r.pre_rotation->half(), r.table.half));
  }
}

}  // namespace

Transformer::Transformer(const ModelFile& file, WeightStorage storage, ComputePath compute)
    : config_(file.config), summary_(file.Summary()), warnings_(file.warnings), files_(file.files) {
  if (storage == WeightStorage::kAuto) storage = WeightStorage::kFile;
  const std::string& src = file.path;
  const ModelTensors& t = file.tensors;
  // The embedding table is only gathered from, unless it is also the classifier (tied).
  weights_.token_embd = MakeWeightMatrix(t.token_embd, src, storage, t.output ? ComputePath::kF32 : compute);
  weights_.position_embd = MakeOptionalMatrix(t.position_embd, src, WeightStorage::kFloat32, ComputePath::kF32);
  weights_.output_norm = MakeNorm(t.output_norm, src);
  weights_.output = MakeOptionalMatrix(t.output, src, storage, compute);
  for (const LayerTensors& lt : t.layers) {
    LayerWeights l;
    l.attn_norm = MakeNorm(lt.attn_norm, src);
    l.wq = MakeWeightMatrix(lt.wq, src, storage, compute);
    l.wk = MakeWeightMatrix(lt.wk, src, storage, compute);
    l.wv = MakeWeightMatrix(lt.wv, src, storage, compute);
    l.bq = MakeOptionalVector(lt.bq, src);
    l.bk = MakeOptionalVector(lt.bk, src);
    l.bv = MakeOptionalVector(lt.bv, src);
    l.q_norm = MakeNorm(lt.q_norm, src);
    l.k_norm = MakeNorm(lt.k_norm, src);
    l.wo = MakeWeightMatrix(lt.wo, src, storage, compute);
    l.bo = MakeOptionalVector(lt.bo, src);
    l.attn_post_norm = MakeNorm(lt.attn_post_norm, src);
    l.ffn_norm = MakeNorm(lt.ffn_norm, src);
    l.w_gate = MakeOptionalMatrix(lt.w_gate, src, storage, compute);
    l.w_up = MakeWeightMatrix(lt.w_up, src, storage, compute);
    l.b_up = MakeOptionalVector(lt.b_up, src);
    l.w_down = MakeWeightMatrix(lt.w_down, src, storage, compute);
    l.b_down = MakeOptionalVector(lt.b_down, src);
    l.ffn_post_norm = MakeNorm(lt.ffn_post_norm, src);
    weights_.layers.push_back(std::move(l));
  }
}

Transformer Transformer::Load(const std::string& path, WeightStorage storage, ComputePath compute,
                              const LoadOptions& options) {
  return Transformer(LoadModelFile(path, options), storage, compute);
}

void Transformer::SetTrainCtx(int64_t l0) {
  if (l0 < 1) throw ConfigError(fmt::format("train_ctx (L0) must be >= 1, got {}", l0));
  config_.train_ctx = l0;
  summary_.train_ctx = l0;
}

void Transformer::SetPositionalSpec(const ModelConfig& c) {
  if (c.layers.size() != config_.layers.size()) {
    throw ConfigError(fmt::format("a positional spec of {} layers for a model of {}", c.layers.size(),
                                  config_.layers.size()));
  }
  ModelConfig next = config_;
  next.layers = c.layers;
  next.train_ctx = c.train_ctx;
  ValidateModelConfig(next, summary_.format);
  config_ = std::move(next);
  summary_.train_ctx = config_.train_ctx;
  if (const LayerSpec* p = PrimaryRopeLayer(config_)) {
    summary_.rope_theta = p->rope_params.rope_theta;
    summary_.rope_scaling = RopeScalingText(*p);
  }
}

const WeightMatrix& Transformer::classifier() const {
  return weights_.output.rows > 0 ? weights_.output : weights_.token_embd;
}

void Transformer::CheckRope(const ForwardRope& rope, std::span<const int64_t> positions) const {
  if (static_cast<int64_t>(rope.layers.size()) != config_.n_layers) {
    throw ShapeError(fmt::format("the RoPE input has {} layers, the model {}", rope.layers.size(), config_.n_layers));
  }
  int64_t max_position = -1;
  for (int64_t p : positions) max_position = std::max(max_position, p);
  for (int64_t l = 0; l < config_.n_layers; ++l) {
    const LayerRope& r = rope.layers[static_cast<size_t>(l)];
    if (r.table.cos != nullptr && !config_.layers[static_cast<size_t>(l)].rope) {
      throw ShapeError(fmt::format("layer {} has no RoPE (NoPE) but the RoPE input gives it a table", l));
    }
    CheckTable(r, l, config_.head_dim, max_position);
    if (r.pre_rotation != nullptr && !Consecutive(positions)) {
      throw RangeError(fmt::format("layer {}: pre-rotation (dynamic scaling) needs positions 0, 1, ..., n - 1", l));
    }
    if (r.position_map != nullptr && (r.table.cos == nullptr || r.inv_freq == nullptr || r.pre_rotation != nullptr)) {
      throw ShapeError(fmt::format("layer {}: a position map needs the layer's RoPE table and inv_freq, and no "
                                   "pre-rotation", l));
    }
  }
}

void Transformer::RefusePositionMaps(const ForwardRope& rope, const char* path) const {
  for (size_t l = 0; l < rope.layers.size(); ++l) {
    if (const PositionMap* map = rope.layers[l].position_map) {
      throw ConfigError(fmt::format("{} has no position maps: layer {} attends through {}, which the prefill forward "
                                    "(Forward) runs", path, l, map->name()));
    }
  }
}

void Transformer::Forward(std::span<const int> tokens, std::span<const int64_t> positions, const ForwardRope& rope,
                          ForwardState& s, float* logits, int64_t logits_from) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (logits_from < 0 || logits_from > n) {
    throw RangeError(fmt::format("logits_from must be in [0, n_tokens = {}], got {}", n, logits_from));
  }
  ForwardHidden(tokens, positions, rope, s);
  Logits(s.xb.data() + logits_from * config_.dim, n - logits_from, logits_from, logits);
}

void Transformer::Logits(const float* hidden, int64_t n, int64_t pos0, float* logits) const {
  if (n <= 0) return;
  Linear(classifier(), n, hidden, config_.dim, logits, config_.vocab_size);
  if (config_.final_logit_softcapping) {
    const float cap = static_cast<float>(*config_.final_logit_softcapping);
    for (int64_t i = 0; i < n * config_.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  CheckActivation(logits, n, config_.vocab_size, pos0, -1, config_.n_layers, "logits");
}

void Transformer::ForwardHidden(std::span<const int> tokens, std::span<const int64_t> positions,
                                const ForwardRope& rope, ForwardState& s) const {
  const ModelConfig& c = config_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  if (static_cast<int64_t>(positions.size()) != n) {
    throw RangeError(fmt::format("{} position ids for {} tokens: one per token is needed", positions.size(), n));
  }
  CheckRope(rope, positions);
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  RunDecoderBlocks(c, weights_, tokens, positions, rope.absolute_scale, s, [&](int64_t l, ForwardState& st, int64_t) {
    const LayerRope& r = rope.layers[static_cast<size_t>(l)];
    const ScoreOptions options = LayerScoreOptions(c, l);
    const bool pre = r.pre_rotation != nullptr;
    if (pre) {
      if (static_cast<int64_t>(st.q_raw.size()) < n * q_dim) st.q_raw.resize(static_cast<size_t>(n * q_dim));
      if (static_cast<int64_t>(st.k_raw.size()) < n * kv_dim) st.k_raw.resize(static_cast<size_t>(n * kv_dim));
      std::copy(st.q.begin(), st.q.begin() + n * q_dim, st.q_raw.begin());
      std::copy(st.k.begin(), st.k.begin() + n * kv_dim, st.k_raw.begin());
    }
    if (r.position_map != nullptr) {
      // The map rotates q and k per score set itself: they enter unrotated.
      CheckActivation(st.q.data(), n, q_dim, 0, l, c.n_layers, "query", hd, st.positions.data());
      CheckActivation(st.k.data(), n, kv_dim, 0, l, c.n_layers, "key", hd, st.positions.data());
      CheckActivation(st.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd, st.positions.data());
      const AttentionInputs raw{st.q.data(), n, q_dim, 0, st.k.data(), st.v.data(), n, kv_dim};
      MappedCausalAttention(dims, raw, st.positions, *r.position_map,
                            MappedRope{r.inv_freq, r.table.half, r.magnitude, c.rope_layout},
                            r.softmax_scale_multiplier, st.att.data(), q_dim, options);
      return;
    }
    if (r.table.cos != nullptr) {
      ApplyRopeQK(HeadsView::Contiguous(st.q.data(), n, c.n_heads, hd),
                  HeadsView::Contiguous(st.k.data(), n, c.n_kv_heads, hd), st.positions, r.table, c.rope_layout);
    }
    // The softmax inputs: a NaN score would otherwise vanish into uniform attention weights.
    const char* q_what = r.table.cos != nullptr ? "query after RoPE" : "query";
    const char* k_what = r.table.cos != nullptr ? "key after RoPE" : "key";
    CheckActivation(st.q.data(), n, q_dim, 0, l, c.n_layers, q_what, hd, st.positions.data());
    CheckActivation(st.k.data(), n, kv_dim, 0, l, c.n_layers, k_what, hd, st.positions.data());
    CheckActivation(st.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd, st.positions.data());
    if (pre && c.rope_layout == RopeLayout::kHalfSplit) {
      // The pre-rotation kernels pair channels (2i, 2i + 1): reorder q and k (rotated and raw) to match.
      const int64_t rotary_dim = 2 * r.table.half;
      HalfSplitToInterleaved(st.q.data(), n * c.n_heads, hd, rotary_dim);
      HalfSplitToInterleaved(st.k.data(), n * c.n_kv_heads, hd, rotary_dim);
      HalfSplitToInterleaved(st.q_raw.data(), n * c.n_heads, hd, rotary_dim);
      HalfSplitToInterleaved(st.k_raw.data(), n * c.n_kv_heads, hd, rotary_dim);
    }
    AttentionInputs rotated{st.q.data(), n, q_dim, 0, st.k.data(), st.v.data(), n, kv_dim};
    if (!pre) {
      CausalAttention(dims, rotated, r.softmax_scale_multiplier, st.att.data(), q_dim, st.attention, options);
    } else {
      AttentionInputs raw{st.q_raw.data(), n, q_dim, 0, st.k_raw.data(), st.v.data(), n, kv_dim};
      CausalAttentionPreRotation(dims, rotated, raw, *r.pre_rotation, r.softmax_scale_multiplier, st.att.data(),
                                 q_dim, st.attention, options);
    }
  });
}

void Transformer::ForwardHiddenContextParallel(std::span<const int> tokens, std::span<const int64_t> positions,
                                               const ContextSplit& split, const ForwardRope& rope, ForwardState& s,
                                               Communicator& comm, RingScratch& ring, RingStats* stats) const {
  const ModelConfig& c = config_;
  const int64_t L = static_cast<int64_t>(tokens.size());
  if (split.n_tokens != L) {
    throw ShapeError(fmt::format("context split covers {} positions, the window has {} tokens", split.n_tokens, L));
  }
  if (split.n_ranks() != comm.size()) {
    throw ShapeError(fmt::format("context split is for {} ranks, the communicator has {}", split.n_ranks(),
                                 comm.size()));
  }
  if (static_cast<int64_t>(positions.size()) != L) {
    throw RangeError(fmt::format("{} position ids for {} tokens: one per token is needed", positions.size(), L));
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    if (c.layers[static_cast<size_t>(l)].sliding()) {
      throw ConfigError(fmt::format("context-parallel attention has no sliding window: layer {} attends within {} "
                                    "keys", l, c.layers[static_cast<size_t>(l)].sliding_window));
    }
  }
  if (c.attn_logit_softcapping || c.query_pre_attn_scalar) {
    throw ConfigError("context-parallel attention has no attention soft-capping or query_pre_attn_scalar: this "
                      "model's attention needs them");
  }
  CheckRope(rope, positions);
  RefusePositionMaps(rope, "context-parallel attention");
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  std::vector<int64_t> rows;
  for (const PositionRange& r : split.ranges[static_cast<size_t>(comm.rank())]) {
    for (int64_t p = r.begin; p < r.end; ++p) rows.push_back(p);
  }
  const int64_t n = static_cast<int64_t>(rows.size());
  std::vector<int> local(static_cast<size_t>(n));
  std::vector<int64_t> local_positions(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    local[static_cast<size_t>(i)] = tokens[static_cast<size_t>(rows[static_cast<size_t>(i)])];
    local_positions[static_cast<size_t>(i)] = positions[static_cast<size_t>(rows[static_cast<size_t>(i)])];
  }
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  if (stats != nullptr) *stats = {};
  RunDecoderBlocks(c, weights_, local, local_positions, rope.absolute_scale, s, [&](int64_t l, ForwardState& st,
                                                                                   int64_t) {
    const LayerRope& r = rope.layers[static_cast<size_t>(l)];
    RingRope ring_rope{CosSinView{}, nullptr, c.rope_layout};
    if (r.pre_rotation != nullptr) {
      // Keys travel unrotated; the ring rotates every query row with its own table (positions = rows here).
      ring_rope.table = r.table;
      ring_rope.pre_rotation = r.pre_rotation;
    } else if (r.table.cos != nullptr) {
      ApplyRopeQK(HeadsView::Contiguous(st.q.data(), n, c.n_heads, hd),
                  HeadsView::Contiguous(st.k.data(), n, c.n_kv_heads, hd), st.positions, r.table, c.rope_layout);
    }
    const bool rotated_here = r.pre_rotation == nullptr && r.table.cos != nullptr;
    CheckActivation(st.q.data(), n, q_dim, 0, l, c.n_layers, rotated_here ? "query after RoPE" : "query before RoPE",
                    hd, st.positions.data());
    CheckActivation(st.k.data(), n, kv_dim, 0, l, c.n_layers, rotated_here ? "key after RoPE" : "key before RoPE", hd,
                    st.positions.data());
    CheckActivation(st.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd, st.positions.data());
    const RingAttentionInputs in{st.q.data(), q_dim, st.k.data(), st.v.data(), kv_dim};
    RingStats layer_stats;
    RingCausalAttention(dims, split, in, ring_rope, r.softmax_scale_multiplier, st.att.data(), q_dim, comm, ring, {},
                        &layer_stats);
    if (stats != nullptr) *stats += layer_stats;
  });
}

void Transformer::DecodeStep(int token, int64_t position, const ForwardRope& rope, KvCache& cache, ForwardState& s,
                             float* logits) const {
  const ModelConfig& c = config_;
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  if (cache.n_layers() != c.n_layers || cache.n_kv_heads() != c.n_kv_heads || cache.head_dim() != hd) {
    throw ShapeError(fmt::format("KV cache shape (layers {}, kv heads {}, head_dim {}) differs from the model's "
                                 "({}, {}, {})", cache.n_layers(), cache.n_kv_heads(), cache.head_dim(),
                                 c.n_layers, c.n_kv_heads, hd));
  }
  const int64_t slot = cache.length();
  if (slot >= cache.max_seq_len()) {
    throw RangeError(fmt::format("decode slot {} is outside the KV cache (max_seq_len {})", slot, cache.max_seq_len()));
  }
  if (position < 0) throw RangeError(fmt::format("decode position must be >= 0, got {}", position));
  std::vector<int64_t> cached(cache.positions());
  cached.push_back(position);
  CheckRope(rope, cached);
  RefusePositionMaps(rope, "KV-cache decoding");
  const int tokens[1] = {token};
  const int64_t positions[1] = {position};
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  RunDecoderBlocks(c, weights_, tokens, positions, rope.absolute_scale, s, [&](int64_t l, ForwardState& st, int64_t) {
    const LayerRope& r = rope.layers[static_cast<size_t>(l)];
    const bool has_rope = r.table.cos != nullptr;
    if (has_rope) {
      ApplyRope(HeadsView::Contiguous(st.q.data(), 1, c.n_heads, hd), st.positions, r.table, c.rope_layout);
      if (cache.mode() == KvCacheMode::kRotated) {
        ApplyRope(HeadsView::Contiguous(st.k.data(), 1, c.n_kv_heads, hd), st.positions, r.table, c.rope_layout);
      }
    }
    CheckActivation(st.q.data(), 1, q_dim, position, l, c.n_layers, has_rope ? "query after RoPE" : "query", hd);
    CheckActivation(st.k.data(), 1, kv_dim, position, l, c.n_layers,
                    has_rope && cache.mode() == KvCacheMode::kRotated ? "key after RoPE" : "key", hd);
    CheckActivation(st.v.data(), 1, kv_dim, position, l, c.n_layers, "value", hd);
    cache.Store(l, slot, st.k.data(), st.v.data(), position);
    // An unrotated cache rotates its keys at use with the layer's table; a NoPE layer has none (keys as stored).
    AttendToCache(dims, cache, l, slot, st.q.data(), has_rope ? r.table : CosSinView{}, c.rope_layout,
                  r.softmax_scale_multiplier, st.att.data(), st.attention, LayerScoreOptions(c, l));
  });
  Linear(classifier(), 1, s.xb.data(), c.dim, logits, c.vocab_size);
  if (c.final_logit_softcapping) {
    const float cap = static_cast<float>(*c.final_logit_softcapping);
    for (int64_t i = 0; i < c.vocab_size; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
  CheckActivation(logits, 1, c.vocab_size, position, -1, c.n_layers, "logits");
}

}  // namespace posenc
