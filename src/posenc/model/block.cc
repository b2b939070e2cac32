#include "posenc/model/block.h"

#include <cmath>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/decoder_layer.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/rmsnorm_row.h"
#include "posenc/kernels/swiglu_kernels.h"
#include "posenc/pe/sinusoidal.h"

namespace posenc {
namespace {

// out[t] = w * (x[t] - mean) / sqrt(var + eps) + b, biased variance (torch.nn.LayerNorm), float32.
void LayerNorm(const float* x, const float* w, const float* b, int64_t n, int64_t dim, float eps, float* out) {
  for (int64_t t = 0; t < n; ++t) {
    const float* xr = x + t * dim;
    float sum = 0.0f;
    for (int64_t i = 0; i < dim; ++i) sum += xr[i];
    const float mean = sum / static_cast<float>(dim);
    float ss = 0.0f;
    for (int64_t i = 0; i < dim; ++i) ss += (xr[i] - mean) * (xr[i] - mean);
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    float* o = out + t * dim;
    for (int64_t i = 0; i < dim; ++i) o[i] = (xr[i] - mean) * inv * w[i] + (b != nullptr ? b[i] : 0.0f);
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

float Gelu(Activation a, float x) {
  if (a == Activation::kGeluErf) return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
  const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);  // sqrt(2/pi) (x + 0.044715 x^3)
  return 0.5f * x * (1.0f + std::tanh(inner));
}

// hb = act(hb) * hb2 (gated) or act(hb), n values.
void Activate(Activation a, bool gated, float* hb, const float* hb2, int64_t n) {
  if (a == Activation::kSilu) {
    if (gated) {
      kernels::SwiGlu(hb, hb2, n);
    } else {
      for (int64_t i = 0; i < n; ++i) hb[i] = hb[i] / (1.0f + std::exp(-hb[i]));
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) hb[i] = gated ? Gelu(a, hb[i]) * hb2[i] : Gelu(a, hb[i]);
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

// x[t] += the absolute position row of positions[t] / scale: learned rows (linearly interpolated between rows for
// a fractional position) or the sinusoidal table.
void AddAbsolutePositions(const ModelConfig& c, const TransformerWeights& w, std::span<const int64_t> positions,
                          double scale, float* x) {
  const int64_t n = static_cast<int64_t>(positions.size()), dim = c.dim;
  if (c.absolute_positions == AbsolutePositions::kSinusoidal) {
    if (scale != 1.0) {
      throw ConfigError("sinusoidal absolute positions are read at integer positions only (absolute_scale 1)");
    }
    SinusoidalParams sp;
    sp.d_model = dim;
    AddSinusoidal(sp, positions, std::span<float>(x, static_cast<size_t>(n * dim)));
    return;
  }
  std::vector<float> a(static_cast<size_t>(dim)), b(static_cast<size_t>(dim));
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = positions[static_cast<size_t>(t)];
    const double at = static_cast<double>(p) / scale;
    const int64_t lo = static_cast<int64_t>(std::floor(at));
    // The last row has no upper neighbour: positions in (n_positions - 1, n_positions) read it as it is.
    const float f = lo == c.n_positions - 1 ? 0.0f : static_cast<float>(at - static_cast<double>(lo));
    if (lo >= c.n_positions || (scale == 1.0 && p >= c.n_positions)) {
      throw RangeError(fmt::format("position {} is past the learned position table of n_positions = {} rows "
                                   "(positions [0, {}){}): learned absolute positions cannot extrapolate; the method "
                                   "linear interpolates the table instead",
                                   p, c.n_positions, c.n_positions,
                                   scale != 1.0 ? fmt::format(", read at {} with factor {}", at, scale) : ""));
    }
    float* xr = x + t * dim;
    w.position_embd.Row(lo, a.data());
    if (f == 0.0f) {
      for (int64_t i = 0; i < dim; ++i) xr[i] += a[static_cast<size_t>(i)];
    } else {
      // Position interpolation of the table: wpe[lo] (1 - f) + wpe[lo + 1] f, each product rounded to float32.
      w.position_embd.Row(lo + 1, b.data());
      const float g = 1.0f - f;
      for (int64_t i = 0; i < dim; ++i) xr[i] += a[static_cast<size_t>(i)] * g + b[static_cast<size_t>(i)] * f;
    }
  }
}

// The parts of DecoderLayerForward over ForwardState's buffers and the file's weights (float32): h is state.xb
// (or state.x without a pre-norm), the branch state.xb2.
struct InferenceSteps {
  const ModelConfig& c;
  ForwardState& s;
  const AttendFn& attend;
  int64_t n = 0;
  const int64_t* positions = nullptr;
  int64_t layer = 0;
  const LayerWeights* lw = nullptr;
  const float* h = nullptr;

  float* Out(Into into) { return into == Into::kResidual ? s.x.data() : s.xb2.data(); }
  static float Beta(Into into) { return into == Into::kBranch ? 0.0f : 1.0f; }

  void Input(bool pre_norm, const NormWeights& norm) {
    h = s.x.data();
    if (!pre_norm) return;
    ApplyNorm(c, norm, s.x.data(), n, c.dim, s.xb.data());
    h = s.xb.data();
  }
  void AttentionInput(bool pre_norm) { Input(pre_norm, lw->attn_norm); }
  void FeedForwardInput(bool pre_norm) { Input(pre_norm, lw->ffn_norm); }
  void ProjectQkv() {
    Linear(lw->wq, n, h, c.dim, s.q.data(), c.q_dim());
    Linear(lw->wk, n, h, c.dim, s.k.data(), c.kv_dim());
    Linear(lw->wv, n, h, c.dim, s.v.data(), c.kv_dim());
    AddBias(s.q.data(), n, lw->bq);
    AddBias(s.k.data(), n, lw->bk);
    AddBias(s.v.data(), n, lw->bv);
  }
  void NormQk(QkNorm norm) {
    if (norm == QkNorm::kPerHead) {
      ApplyNorm(c, lw->q_norm, s.q.data(), n * c.n_heads, c.head_dim, s.q.data());
      ApplyNorm(c, lw->k_norm, s.k.data(), n * c.n_kv_heads, c.head_dim, s.k.data());
    } else {
      ApplyNorm(c, lw->q_norm, s.q.data(), n, c.q_dim(), s.q.data());
      ApplyNorm(c, lw->k_norm, s.k.data(), n, c.kv_dim(), s.k.data());
    }
  }
  void Attend() { attend(layer, s, n); }  // s.q, s.k, s.v -> s.att
  void AttentionOutput(Into into) {
    float* out = Out(into);
    Linear(lw->wo, n, s.att.data(), c.q_dim(), out, c.dim, Beta(into));
    AddBias(out, n, lw->bo);
  }
  void FeedForward(Into into) {
    const int64_t dim = c.dim, hidden = c.hidden_dim;
    if (c.gated_ffn) Linear(lw->w_gate, n, h, dim, s.hb.data(), hidden);
    Linear(lw->w_up, n, h, dim, c.gated_ffn ? s.hb2.data() : s.hb.data(), hidden);
    AddBias(s.hb.data(), n, lw->b_up);
    Activate(c.activation, c.gated_ffn, s.hb.data(), s.hb2.data(), n * hidden);
    float* out = Out(into);
    Linear(lw->w_down, n, s.hb.data(), hidden, out, dim, Beta(into));
    AddBias(out, n, lw->b_down);
  }
  void PostNorm(PostNormSite site) {
    ApplyNorm(c, site == PostNormSite::kAttention ? lw->attn_post_norm : lw->ffn_post_norm, s.xb2.data(), n, c.dim,
              s.xb2.data());
  }
  void AddBranch() {
    for (int64_t i = 0; i < n * c.dim; ++i) s.x[static_cast<size_t>(i)] += s.xb2[static_cast<size_t>(i)];
  }
  void CheckResidual(const char* what) {
    CheckActivation(s.x.data(), n, c.dim, 0, layer, c.n_layers, what, 0, positions);
  }
};

}  // namespace

void CheckActivation(const float* x, int64_t n, int64_t width, int64_t pos0, int64_t layer, int64_t n_layers,
                     const char* what, int64_t head_dim, const int64_t* positions) {
  const int64_t i = kernels::FirstNonFinite(x, n * width);
  if (i < 0) return;
  const int64_t row = i / width, c = i % width;
  const int64_t pos = positions != nullptr ? positions[row] : pos0 + row;
  const std::string where = head_dim > 0 ? fmt::format("head {}, channel {}", c / head_dim, c % head_dim)
                                         : fmt::format("channel {}", c);
  const std::string layer_text = layer >= 0 ? fmt::format("layer {} of {}, ", layer, n_layers) : std::string();
  throw NumericError(fmt::format("{}position {}: {} ({}) is {} (the model's weights were checked finite at "
                                 "load, so an activation overflowed float32 or the RoPE table is not finite)",
                                 layer_text, pos, what, where, x[i]));
}

void ApplyNorm(const ModelConfig& c, const NormWeights& w, const float* x, int64_t n, int64_t width, float* out) {
  const float eps = static_cast<float>(c.norm_eps);
  if (c.norm == NormType::kRms) {
    kernels::RmsNormRows(x, w.w.data(), n, width, eps, out);
  } else {
    LayerNorm(x, w.w.data(), w.b.empty() ? nullptr : w.b.data(), n, width, eps, out);
  }
}

ScoreOptions LayerScoreOptions(const ModelConfig& c, int64_t layer) {
  ScoreOptions o;
  o.query_pre_attn_scalar = c.query_pre_attn_scalar;
  o.window = c.layers[static_cast<size_t>(layer)].sliding_window;
  o.softcap = c.attn_logit_softcapping.value_or(0.0);
  return o;
}

void RunDecoderBlocks(const ModelConfig& c, const TransformerWeights& w, std::span<const int> tokens,
                      std::span<const int64_t> positions, double absolute_scale, ForwardState& s,
                      const AttendFn& attend) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const int64_t dim = c.dim, q_dim = c.q_dim(), kv_dim = c.kv_dim(), hidden = c.hidden_dim;
  if (static_cast<int64_t>(positions.size()) != n) {
    throw RangeError(fmt::format("{} position ids for {} tokens: one per token is needed", positions.size(), n));
  }
  for (int64_t t = 0; t < n; ++t) {
    CheckToken(t, tokens[static_cast<size_t>(t)], c.vocab_size);
    if (positions[static_cast<size_t>(t)] < 0) {
      throw RangeError(fmt::format("position id at index {} must be >= 0, got {}", t, positions[static_cast<size_t>(t)]));
    }
  }
  s.positions.assign(positions.begin(), positions.end());
  const int64_t* pos = s.positions.data();
  Grow(s.x, n * dim);
  Grow(s.xb, n * dim);
  Grow(s.xb2, n * dim);
  Grow(s.q, n * q_dim);
  Grow(s.k, n * kv_dim);
  Grow(s.v, n * kv_dim);
  Grow(s.att, n * q_dim);
  Grow(s.hb, n * hidden);
  Grow(s.hb2, n * hidden);
  for (int64_t t = 0; t < n; ++t) w.token_embd.Row(tokens[static_cast<size_t>(t)], s.x.data() + t * dim);
  if (c.embedding_scale != 1.0) {
    const float scale = static_cast<float>(c.embedding_scale);
    for (int64_t i = 0; i < n * dim; ++i) s.x[static_cast<size_t>(i)] *= scale;
  }
  if (c.absolute_positions != AbsolutePositions::kNone) AddAbsolutePositions(c, w, positions, absolute_scale, s.x.data());

  InferenceSteps steps{c, s, attend, n, pos};
  for (int64_t l = 0; l < c.n_layers; ++l) {
    steps.layer = l;
    steps.lw = &w.layers[static_cast<size_t>(l)];
    DecoderLayerForward(c, steps);
  }
  ApplyNorm(c, w.output_norm, s.x.data(), n, dim, s.xb.data());
}

}  // namespace posenc
