#include "posenc/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/swiglu_kernels.h"
#include "posenc/rope/apply.h"

namespace posenc {
namespace {

// out[t] = w * x[t] / sqrt(mean(x[t]^2) + eps), for n rows of width dim (llama2.c `rmsnorm`, transformers
// LlamaRMSNorm: the mean of squares in float32, eps inside the square root).
void RmsNorm(const float* x, const float* w, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    float* o = out + t * dim;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) o[i] = w[i] * (inv * xr[i]);
  }
}

// y[t] += b for n rows of width b.size() (row stride = width); no-op for an empty bias.
void AddBias(float* y, int64_t n, const std::vector<float>& b) {
  const int64_t width = static_cast<int64_t>(b.size());
  for (int64_t t = 0; t < n && width > 0; ++t) {
    float* row = y + t * width;
#pragma omp simd
    for (int64_t i = 0; i < width; ++i) row[i] += b[static_cast<size_t>(i)];
  }
}

void Grow(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

void CheckToken(int64_t index, int token, int64_t vocab_size) {
  if (token < 0 || token >= vocab_size) {
    throw RangeError(fmt::format("token id at index {} must be in [0, vocab_size={}), got {}", index, vocab_size,
                                 token));
  }
}

void CheckTable(const CosSinView& table, int64_t rows_needed, int64_t head_dim) {
  if (table.half < 1 || 2 * table.half > head_dim) {
    throw ShapeError(fmt::format("RoPE table: rotary_dim = 2 * half = {} must be in [2, head_dim = {}]",
                                 2 * table.half, head_dim));
  }
  if (table.n_rows < rows_needed) {
    throw RangeError(fmt::format("RoPE table has {} rows, positions [0, {}) need {}", table.n_rows, rows_needed,
                                 rows_needed));
  }
}

void CheckPreRotation(const ForwardRope& rope) {
  if (rope.pre_rotation != nullptr && rope.pre_rotation->half() != rope.table.half) {
    throw ShapeError(fmt::format("pre-rotation tables have half = {}, the RoPE table {}",
                                 rope.pre_rotation->half(), rope.table.half));
  }
}

// Throws NumericError if rows [0, n) of a row-major [n, width] activation hold NaN or infinity: one pass over
// n * width floats (next to the n * width * dim multiply-adds that produced them). Row t is position pos0 + t.
// head_dim > 0 splits a row into heads for the message.
// positions (if non-null) [n]: the position of each row instead.
void CheckActivation(const float* x, int64_t n, int64_t width, int64_t pos0, int64_t layer, int64_t n_layers,
                     const char* what, int64_t head_dim = 0, const int64_t* positions = nullptr) {
  const int64_t i = kernels::FirstNonFinite(x, n * width);
  if (i < 0) return;
  const int64_t t = positions != nullptr ? positions[i / width] - pos0 : i / width, c = i % width;
  const std::string where = head_dim > 0 ? fmt::format("head {}, channel {}", c / head_dim, c % head_dim)
                                         : fmt::format("channel {}", c);
  const std::string layer_text = layer >= 0 ? fmt::format("layer {} of {}, ", layer, n_layers) : std::string();
  throw NumericError(fmt::format("{}position {}: {} ({}) is {} (the model's weights were checked finite at "
                                 "load, so an activation overflowed float32 or the RoPE table is not finite)",
                                 layer_text, pos0 + t, what, where, x[i]));
}

std::vector<float> MakeOptionalVector(const std::optional<TensorView>& t, const std::string& src) {
  return t ? MakeWeightVector(*t, src) : std::vector<float>();
}

}  // namespace

Transformer::Transformer(const ModelFile& file, WeightStorage storage, ComputePath compute)
    : config_(file.config), summary_(file.Summary()), files_(file.files) {
  if (storage == WeightStorage::kAuto) storage = WeightStorage::kFile;
  const std::string& src = file.path;
  const ModelTensors& t = file.tensors;
  // The embedding table is only gathered from, unless it is also the classifier (tied).
  weights_.token_embd = MakeWeightMatrix(t.token_embd, src, storage, t.output ? ComputePath::kF32 : compute);
  weights_.output_norm = MakeWeightVector(t.output_norm, src);
  if (t.output) weights_.output = MakeWeightMatrix(*t.output, src, storage, compute);
  for (const LayerTensors& lt : t.layers) {
    LayerWeights l;
    l.attn_norm = MakeWeightVector(lt.attn_norm, src);
    l.wq = MakeWeightMatrix(lt.wq, src, storage, compute);
    l.wk = MakeWeightMatrix(lt.wk, src, storage, compute);
    l.wv = MakeWeightMatrix(lt.wv, src, storage, compute);
    l.wo = MakeWeightMatrix(lt.wo, src, storage, compute);
    l.bq = MakeOptionalVector(lt.bq, src);
    l.bk = MakeOptionalVector(lt.bk, src);
    l.bv = MakeOptionalVector(lt.bv, src);
    l.bo = MakeOptionalVector(lt.bo, src);
    l.ffn_norm = MakeWeightVector(lt.ffn_norm, src);
    l.w1 = MakeWeightMatrix(lt.w1, src, storage, compute);
    l.w2 = MakeWeightMatrix(lt.w2, src, storage, compute);
    l.w3 = MakeWeightMatrix(lt.w3, src, storage, compute);
    weights_.layers.push_back(std::move(l));
  }
}

Transformer Transformer::Load(const std::string& path, WeightStorage storage, ComputePath compute) {
  return Transformer(LoadModelFile(path), storage, compute);
}

void Transformer::SetTrainCtx(int64_t l0) {
  if (l0 < 1) throw ConfigError(fmt::format("train_ctx (L0) must be >= 1, got {}", l0));
  config_.train_ctx = l0;
  summary_.train_ctx = l0;
}

const WeightMatrix& Transformer::classifier() const {
  return weights_.output.rows > 0 ? weights_.output : weights_.token_embd;
}

void Transformer::Forward(std::span<const int> tokens, const ForwardRope& rope, ForwardState& s, float* logits,
                          int64_t logits_from) const {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (logits_from < 0 || logits_from > n) {
    throw RangeError(fmt::format("logits_from must be in [0, n_tokens = {}], got {}", n, logits_from));
  }
  ForwardHidden(tokens, rope, s);
  Logits(s.xb.data() + logits_from * config_.dim, n - logits_from, logits_from, logits);
}

void Transformer::Logits(const float* hidden, int64_t n, int64_t pos0, float* logits) const {
  if (n <= 0) return;
  Linear(classifier(), n, hidden, config_.dim, logits, config_.vocab_size);
  CheckActivation(logits, n, config_.vocab_size, pos0, -1, config_.n_layers, "logits");
}

void Transformer::ForwardHidden(std::span<const int> tokens, const ForwardRope& rope, ForwardState& s) const {
  const LlamaConfig& c = config_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  for (int64_t t = 0; t < n; ++t) CheckToken(t, tokens[static_cast<size_t>(t)], c.vocab_size);
  CheckTable(rope.table, n, hd);
  CheckPreRotation(rope);
  s.rows.resize(static_cast<size_t>(n));
  std::iota(s.rows.begin(), s.rows.end(), int64_t{0});
  if (rope.pre_rotation != nullptr) {
    Grow(s.q_raw, n * q_dim);
    Grow(s.k_raw, n * kv_dim);
  }
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  RunBlocks(tokens, s, [&](int64_t l) {
    if (rope.pre_rotation != nullptr) {
      std::copy(s.q.begin(), s.q.begin() + n * q_dim, s.q_raw.begin());
      std::copy(s.k.begin(), s.k.begin() + n * kv_dim, s.k_raw.begin());
    }
    ApplyRopeQK(HeadsView::Contiguous(s.q.data(), n, c.n_heads, hd),
                HeadsView::Contiguous(s.k.data(), n, c.n_kv_heads, hd), s.rows, rope.table, c.rope_layout);
    // The softmax inputs: a NaN score would otherwise vanish into uniform attention weights.
    CheckActivation(s.q.data(), n, q_dim, 0, l, c.n_layers, "query after RoPE", hd);
    CheckActivation(s.k.data(), n, kv_dim, 0, l, c.n_layers, "key after RoPE", hd);
    CheckActivation(s.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd);
    if (rope.pre_rotation != nullptr && c.rope_layout == RopeLayout::kHalfSplit) {
      // The pre-rotation kernels pair channels (2i, 2i + 1): reorder q and k (rotated and raw) to match.
      const int64_t rotary_dim = 2 * rope.table.half;
      HalfSplitToInterleaved(s.q.data(), n * c.n_heads, hd, rotary_dim);
      HalfSplitToInterleaved(s.k.data(), n * c.n_kv_heads, hd, rotary_dim);
      HalfSplitToInterleaved(s.q_raw.data(), n * c.n_heads, hd, rotary_dim);
      HalfSplitToInterleaved(s.k_raw.data(), n * c.n_kv_heads, hd, rotary_dim);
    }
    AttentionInputs rotated{s.q.data(), n, q_dim, 0, s.k.data(), s.v.data(), n, kv_dim};
    if (rope.pre_rotation == nullptr) {
      CausalAttention(dims, rotated, rope.softmax_scale_multiplier, s.att.data(), q_dim, s.attention);
    } else {
      AttentionInputs raw{s.q_raw.data(), n, q_dim, 0, s.k_raw.data(), s.v.data(), n, kv_dim};
      CausalAttentionPreRotation(dims, rotated, raw, *rope.pre_rotation, rope.softmax_scale_multiplier,
                                 s.att.data(), q_dim, s.attention);
    }
  });
}

void Transformer::ForwardHiddenContextParallel(std::span<const int> tokens, const ContextSplit& split,
                                               const ForwardRope& rope, ForwardState& s, Communicator& comm,
                                               RingScratch& ring, RingStats* stats) const {
  const LlamaConfig& c = config_;
  const int64_t L = static_cast<int64_t>(tokens.size());
  if (split.n_tokens != L) {
    throw ShapeError(fmt::format("context split covers {} positions, the window has {} tokens", split.n_tokens, L));
  }
  if (split.n_ranks() != comm.size()) {
    throw ShapeError(fmt::format("context split is for {} ranks, the communicator has {}", split.n_ranks(),
                                 comm.size()));
  }
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), hd = c.head_dim;
  for (int64_t t = 0; t < L; ++t) CheckToken(t, tokens[static_cast<size_t>(t)], c.vocab_size);
  CheckTable(rope.table, L, hd);
  CheckPreRotation(rope);
  s.rows.clear();
  for (const PositionRange& r : split.ranges[static_cast<size_t>(comm.rank())]) {
    for (int64_t p = r.begin; p < r.end; ++p) s.rows.push_back(p);
  }
  const int64_t n = static_cast<int64_t>(s.rows.size());
  std::vector<int> local(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) local[static_cast<size_t>(i)] = tokens[static_cast<size_t>(s.rows[static_cast<size_t>(i)])];
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  const RingRope ring_rope{rope.table, rope.pre_rotation, c.rope_layout};
  if (stats != nullptr) *stats = {};
  RunBlocks(local, s, [&](int64_t l) {
    // RingCausalAttention rotates q and k itself with the global positions (each query row's own table for
    // pre-rotation rows): the unrotated inputs are checked here.
    CheckActivation(s.q.data(), n, q_dim, 0, l, c.n_layers, "query before RoPE", hd, s.rows.data());
    CheckActivation(s.k.data(), n, kv_dim, 0, l, c.n_layers, "key before RoPE", hd, s.rows.data());
    CheckActivation(s.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd, s.rows.data());
    const RingAttentionInputs in{s.q.data(), q_dim, s.k.data(), s.v.data(), kv_dim};
    RingStats layer_stats;
    RingCausalAttention(dims, split, in, ring_rope, rope.softmax_scale_multiplier, s.att.data(), q_dim, comm, ring,
                        {}, &layer_stats);
    if (stats != nullptr) *stats += layer_stats;
  });
}

void Transformer::RunBlocks(std::span<const int> tokens, ForwardState& s,
                            const std::function<void(int64_t layer)>& attend) const {
  const LlamaConfig& c = config_;
  const TransformerWeights& w = weights_;
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t* positions = s.rows.data();  // row t sits at position positions[t]
  Grow(s.x, n * dim);
  Grow(s.xb, n * dim);
  Grow(s.q, n * q_dim);
  Grow(s.k, n * kv_dim);
  Grow(s.v, n * kv_dim);
  Grow(s.att, n * q_dim);
  Grow(s.hb, n * hidden);
  Grow(s.hb2, n * hidden);
  for (int64_t t = 0; t < n; ++t) w.token_embd.Row(tokens[static_cast<size_t>(t)], s.x.data() + t * dim);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    // attention block
    RmsNorm(s.x.data(), lw.attn_norm.data(), n, dim, eps, s.xb.data());
    Linear(lw.wq, n, s.xb.data(), dim, s.q.data(), q_dim);
    Linear(lw.wk, n, s.xb.data(), dim, s.k.data(), kv_dim);
    Linear(lw.wv, n, s.xb.data(), dim, s.v.data(), kv_dim);
    AddBias(s.q.data(), n, lw.bq);
    AddBias(s.k.data(), n, lw.bk);
    AddBias(s.v.data(), n, lw.bv);
    attend(l);  // s.q, s.k, s.v -> s.att
    Linear(lw.wo, n, s.att.data(), q_dim, s.x.data(), dim, 1.0f);
    AddBias(s.x.data(), n, lw.bo);
    CheckActivation(s.x.data(), n, dim, 0, l, c.n_layers, "residual stream after the attention block", 0, positions);
    // feed-forward block
    RmsNorm(s.x.data(), lw.ffn_norm.data(), n, dim, eps, s.xb.data());
    Linear(lw.w1, n, s.xb.data(), dim, s.hb.data(), hidden);
    Linear(lw.w3, n, s.xb.data(), dim, s.hb2.data(), hidden);
    kernels::SwiGlu(s.hb.data(), s.hb2.data(), n * hidden);
    Linear(lw.w2, n, s.hb.data(), hidden, s.x.data(), dim, 1.0f);
    CheckActivation(s.x.data(), n, dim, 0, l, c.n_layers, "residual stream after the feed-forward block", 0,
                    positions);
  }
  RmsNorm(s.x.data(), w.output_norm.data(), n, dim, eps, s.xb.data());
}

void Transformer::DecodeStep(int token, const CosSinView& table, float softmax_scale_multiplier, KvCache& cache,
                             ForwardState& s, float* logits) const {
  const LlamaConfig& c = config_;
  const TransformerWeights& w = weights_;
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_norm_eps);
  CheckToken(0, token, c.vocab_size);
  if (cache.n_layers() != c.n_layers || cache.n_kv_heads() != c.n_kv_heads || cache.head_dim() != hd) {
    throw ShapeError(fmt::format("KV cache shape (layers {}, kv heads {}, head_dim {}) differs from the model's "
                                 "({}, {}, {})", cache.n_layers(), cache.n_kv_heads(), cache.head_dim(),
                                 c.n_layers, c.n_kv_heads, hd));
  }
  const int64_t pos = cache.length();
  if (pos >= cache.max_seq_len()) {
    throw RangeError(fmt::format("decode position {} is outside the KV cache (max_seq_len {})", pos,
                                 cache.max_seq_len()));
  }
  CheckTable(table, pos + 1, hd);
  Grow(s.x, dim);
  Grow(s.xb, dim);
  Grow(s.q, q_dim);
  Grow(s.k, kv_dim);
  Grow(s.v, kv_dim);
  Grow(s.att, q_dim);
  Grow(s.hb, hidden);
  Grow(s.hb2, hidden);
  const int64_t row[1] = {pos};
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  w.token_embd.Row(token, s.x.data());
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    RmsNorm(s.x.data(), lw.attn_norm.data(), 1, dim, eps, s.xb.data());
    Linear(lw.wq, 1, s.xb.data(), dim, s.q.data(), q_dim);
    Linear(lw.wk, 1, s.xb.data(), dim, s.k.data(), kv_dim);
    Linear(lw.wv, 1, s.xb.data(), dim, s.v.data(), kv_dim);
    AddBias(s.q.data(), 1, lw.bq);
    AddBias(s.k.data(), 1, lw.bk);
    AddBias(s.v.data(), 1, lw.bv);
    ApplyRope(HeadsView::Contiguous(s.q.data(), 1, c.n_heads, hd), row, table, c.rope_layout);
    if (cache.mode() == KvCacheMode::kRotated) {
      ApplyRope(HeadsView::Contiguous(s.k.data(), 1, c.n_kv_heads, hd), row, table, c.rope_layout);
    }
    CheckActivation(s.q.data(), 1, q_dim, pos, l, c.n_layers, "query after RoPE", hd);
    CheckActivation(s.k.data(), 1, kv_dim, pos, l, c.n_layers,
                    cache.mode() == KvCacheMode::kRotated ? "key after RoPE" : "key", hd);
    CheckActivation(s.v.data(), 1, kv_dim, pos, l, c.n_layers, "value", hd);
    cache.Store(l, pos, s.k.data(), s.v.data());
    AttendToCache(dims, cache, l, pos, s.q.data(), table, c.rope_layout, softmax_scale_multiplier, s.att.data(),
                  s.attention);
    Linear(lw.wo, 1, s.att.data(), q_dim, s.x.data(), dim, 1.0f);
    AddBias(s.x.data(), 1, lw.bo);
    CheckActivation(s.x.data(), 1, dim, pos, l, c.n_layers, "residual stream after the attention block");
    RmsNorm(s.x.data(), lw.ffn_norm.data(), 1, dim, eps, s.xb.data());
    Linear(lw.w1, 1, s.xb.data(), dim, s.hb.data(), hidden);
    Linear(lw.w3, 1, s.xb.data(), dim, s.hb2.data(), hidden);
    kernels::SwiGlu(s.hb.data(), s.hb2.data(), hidden);
    Linear(lw.w2, 1, s.hb.data(), hidden, s.x.data(), dim, 1.0f);
    CheckActivation(s.x.data(), 1, dim, pos, l, c.n_layers, "residual stream after the feed-forward block");
  }
  RmsNorm(s.x.data(), w.output_norm.data(), 1, dim, eps, s.xb.data());
  Linear(classifier(), 1, s.xb.data(), dim, logits, c.vocab_size);
  CheckActivation(logits, 1, c.vocab_size, pos, -1, c.n_layers, "logits");
}

}  // namespace posenc
