#include "posenc/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/swiglu_kernels.h"
#include "posenc/rope/apply.h"

namespace posenc {
namespace {

constexpr float kRmsNormEps = 1e-5f;            // llama2.c run.c `rmsnorm`
constexpr RopeLayout kLayout = RopeLayout::kInterleaved;  // llama2.c rotates pairs (2i, 2i+1)

// out[t] = w * x[t] / sqrt(mean(x[t]^2) + eps), for n rows of width dim (llama2.c `rmsnorm`).
void RmsNorm(const float* x, const float* w, int64_t n, int64_t dim, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + kRmsNormEps);
    float* o = out + t * dim;
#pragma omp simd
    for (int64_t i = 0; i < dim; ++i) o[i] = w[i] * (inv * xr[i]);
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

// Throws NumericError if rows [0, n) of a row-major [n, width] activation hold NaN or infinity: one pass over
// n * width floats (next to the n * width * dim multiply-adds that produced them). Row t is position pos0 + t.
// head_dim > 0 splits a row into heads for the message.
void CheckActivation(const float* x, int64_t n, int64_t width, int64_t pos0, int64_t layer, int64_t n_layers,
                     const char* what, int64_t head_dim = 0) {
  const int64_t i = kernels::FirstNonFinite(x, n * width);
  if (i < 0) return;
  const int64_t t = i / width, c = i % width;
  const std::string where = head_dim > 0 ? fmt::format("head {}, channel {}", c / head_dim, c % head_dim)
                                         : fmt::format("channel {}", c);
  const std::string layer_text = layer >= 0 ? fmt::format("layer {} of {}, ", layer, n_layers) : std::string();
  throw NumericError(fmt::format("{}position {}: {} ({}) is {} (the checkpoint's weights were checked finite at "
                                 "load, so an activation overflowed float32 or the RoPE table is not finite)",
                                 layer_text, pos0 + t, what, where, x[i]));
}

}  // namespace

Transformer::Transformer(Checkpoint checkpoint) : checkpoint_(std::move(checkpoint)) {}

void Transformer::Forward(std::span<const int> tokens, const ForwardRope& rope, ForwardState& s,
                          float* logits) const {
  const ModelConfig& c = config();
  const ModelWeights& w = weights();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return;
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim, hd = c.head_dim();
  for (int64_t t = 0; t < n; ++t) CheckToken(t, tokens[static_cast<size_t>(t)], c.vocab_size);
  CheckTable(rope.table, n, hd);
  if (rope.pre_rotation != nullptr && rope.pre_rotation->half() != rope.table.half) {
    throw ShapeError(fmt::format("pre-rotation tables have half = {}, the RoPE table {}",
                                 rope.pre_rotation->half(), rope.table.half));
  }
  Grow(s.x, n * dim);
  Grow(s.xb, n * dim);
  Grow(s.q, n * dim);
  Grow(s.k, n * kv_dim);
  Grow(s.v, n * kv_dim);
  Grow(s.att, n * dim);
  Grow(s.hb, n * hidden);
  Grow(s.hb2, n * hidden);
  if (rope.pre_rotation != nullptr) {
    Grow(s.q_raw, n * dim);
    Grow(s.k_raw, n * kv_dim);
  }
  s.rows.resize(static_cast<size_t>(n));
  std::iota(s.rows.begin(), s.rows.end(), int64_t{0});
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};

  for (int64_t t = 0; t < n; ++t) {
    const float* e = w.token_embedding_table.data() + tokens[static_cast<size_t>(t)] * dim;
    std::copy(e, e + dim, s.x.begin() + t * dim);
  }
  for (int64_t l = 0; l < c.n_layers; ++l) {
    // attention block
    RmsNorm(s.x.data(), w.rms_att_weight.data() + l * dim, n, dim, s.xb.data());
    GemmNT(n, dim, dim, s.xb.data(), dim, w.wq.data() + l * dim * dim, dim, s.q.data(), dim);
    GemmNT(n, kv_dim, dim, s.xb.data(), dim, w.wk.data() + l * kv_dim * dim, dim, s.k.data(), kv_dim);
    GemmNT(n, kv_dim, dim, s.xb.data(), dim, w.wv.data() + l * kv_dim * dim, dim, s.v.data(), kv_dim);
    if (rope.pre_rotation != nullptr) {
      std::copy(s.q.begin(), s.q.begin() + n * dim, s.q_raw.begin());
      std::copy(s.k.begin(), s.k.begin() + n * kv_dim, s.k_raw.begin());
    }
    ApplyRopeQK(HeadsView::Contiguous(s.q.data(), n, c.n_heads, hd),
                HeadsView::Contiguous(s.k.data(), n, c.n_kv_heads, hd), s.rows, rope.table, kLayout);
    // The softmax inputs: a NaN score would otherwise vanish into uniform attention weights.
    CheckActivation(s.q.data(), n, dim, 0, l, c.n_layers, "query after RoPE", hd);
    CheckActivation(s.k.data(), n, kv_dim, 0, l, c.n_layers, "key after RoPE", hd);
    CheckActivation(s.v.data(), n, kv_dim, 0, l, c.n_layers, "value", hd);
    AttentionInputs rotated{s.q.data(), n, dim, 0, s.k.data(), s.v.data(), n, kv_dim};
    if (rope.pre_rotation == nullptr) {
      CausalAttention(dims, rotated, rope.softmax_scale_multiplier, s.att.data(), dim, s.attention);
    } else {
      AttentionInputs raw{s.q_raw.data(), n, dim, 0, s.k_raw.data(), s.v.data(), n, kv_dim};
      CausalAttentionPreRotation(dims, rotated, raw, *rope.pre_rotation, rope.softmax_scale_multiplier,
                                 s.att.data(), dim, s.attention);
    }
    GemmNT(n, dim, dim, s.att.data(), dim, w.wo.data() + l * dim * dim, dim, s.x.data(), dim, 1.0f);
    CheckActivation(s.x.data(), n, dim, 0, l, c.n_layers, "residual stream after the attention block");
    // feed-forward block
    RmsNorm(s.x.data(), w.rms_ffn_weight.data() + l * dim, n, dim, s.xb.data());
    GemmNT(n, hidden, dim, s.xb.data(), dim, w.w1.data() + l * hidden * dim, dim, s.hb.data(), hidden);
    GemmNT(n, hidden, dim, s.xb.data(), dim, w.w3.data() + l * hidden * dim, dim, s.hb2.data(), hidden);
    kernels::SwiGlu(s.hb.data(), s.hb2.data(), n * hidden);
    GemmNT(n, dim, hidden, s.hb.data(), hidden, w.w2.data() + l * dim * hidden, hidden, s.x.data(), dim, 1.0f);
    CheckActivation(s.x.data(), n, dim, 0, l, c.n_layers, "residual stream after the feed-forward block");
  }
  RmsNorm(s.x.data(), w.rms_final_weight.data(), n, dim, s.xb.data());
  GemmNT(n, c.vocab_size, dim, s.xb.data(), dim, w.classifier(), dim, logits, c.vocab_size);
  CheckActivation(logits, n, c.vocab_size, 0, -1, c.n_layers, "logits");
}

void Transformer::DecodeStep(int token, const CosSinView& table, float softmax_scale_multiplier, KvCache& cache,
                             ForwardState& s, float* logits) const {
  const ModelConfig& c = config();
  const ModelWeights& w = weights();
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), hidden = c.hidden_dim, hd = c.head_dim();
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
  Grow(s.q, dim);
  Grow(s.k, kv_dim);
  Grow(s.v, kv_dim);
  Grow(s.att, dim);
  Grow(s.hb, hidden);
  Grow(s.hb2, hidden);
  const int64_t row[1] = {pos};
  const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
  const float* e = w.token_embedding_table.data() + static_cast<int64_t>(token) * dim;
  std::copy(e, e + dim, s.x.begin());
  for (int64_t l = 0; l < c.n_layers; ++l) {
    RmsNorm(s.x.data(), w.rms_att_weight.data() + l * dim, 1, dim, s.xb.data());
    MatVec(dim, dim, w.wq.data() + l * dim * dim, s.xb.data(), s.q.data());
    MatVec(kv_dim, dim, w.wk.data() + l * kv_dim * dim, s.xb.data(), s.k.data());
    MatVec(kv_dim, dim, w.wv.data() + l * kv_dim * dim, s.xb.data(), s.v.data());
    ApplyRope(HeadsView::Contiguous(s.q.data(), 1, c.n_heads, hd), row, table, kLayout);
    if (cache.mode() == KvCacheMode::kRotated) {
      ApplyRope(HeadsView::Contiguous(s.k.data(), 1, c.n_kv_heads, hd), row, table, kLayout);
    }
    CheckActivation(s.q.data(), 1, dim, pos, l, c.n_layers, "query after RoPE", hd);
    CheckActivation(s.k.data(), 1, kv_dim, pos, l, c.n_layers,
                    cache.mode() == KvCacheMode::kRotated ? "key after RoPE" : "key", hd);
    CheckActivation(s.v.data(), 1, kv_dim, pos, l, c.n_layers, "value", hd);
    cache.Store(l, pos, s.k.data(), s.v.data());
    AttendToCache(dims, cache, l, pos, s.q.data(), table, kLayout, softmax_scale_multiplier, s.att.data(),
                  s.attention);
    MatVec(dim, dim, w.wo.data() + l * dim * dim, s.att.data(), s.x.data(), 1.0f);
    CheckActivation(s.x.data(), 1, dim, pos, l, c.n_layers, "residual stream after the attention block");
    RmsNorm(s.x.data(), w.rms_ffn_weight.data() + l * dim, 1, dim, s.xb.data());
    MatVec(hidden, dim, w.w1.data() + l * hidden * dim, s.xb.data(), s.hb.data());
    MatVec(hidden, dim, w.w3.data() + l * hidden * dim, s.xb.data(), s.hb2.data());
    kernels::SwiGlu(s.hb.data(), s.hb2.data(), hidden);
    MatVec(dim, hidden, w.w2.data() + l * dim * hidden, s.hb.data(), s.x.data(), 1.0f);
    CheckActivation(s.x.data(), 1, dim, pos, l, c.n_layers, "residual stream after the feed-forward block");
  }
  RmsNorm(s.x.data(), w.rms_final_weight.data(), 1, dim, s.xb.data());
  MatVec(c.vocab_size, dim, w.classifier(), s.xb.data(), logits);
  CheckActivation(logits, 1, c.vocab_size, pos, -1, c.n_layers, "logits");
}

}  // namespace posenc
