#include "posenc/train/config.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"

namespace posenc {
namespace {

struct Named {
  PositionEncoding encoding;
  std::string_view name;
};
constexpr Named kNames[] = {{PositionEncoding::kRope, "rope"},
                            {PositionEncoding::kSinusoidal, "sinusoidal"},
                            {PositionEncoding::kLearned, "learned"},
                            {PositionEncoding::kNone, "none"}};

}  // namespace

std::string_view PositionEncodingName(PositionEncoding encoding) {
  for (const Named& n : kNames) {
    if (n.encoding == encoding) return n.name;
  }
  return "unknown";
}

PositionEncoding ParsePositionEncoding(std::string_view name) {
  for (const Named& n : kNames) {
    if (n.name == name) return n.encoding;
  }
  throw ConfigError(fmt::format("position_encoding must be one of rope, sinusoidal, learned, none, got '{}'", name));
}

void ValidateTrainShape(const TrainShape& c) {
  const std::pair<const char*, int64_t> positive[] = {
      {"dim", c.dim},         {"hidden_dim", c.hidden_dim}, {"n_layers", c.n_layers},      {"n_heads", c.n_heads},
      {"n_kv_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size}, {"max_seq_len", c.max_seq_len}};
  for (const auto& [name, value] : positive) {
    if (value < 1) throw ConfigError(fmt::format("{} must be >= 1, got {}", name, value));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    throw ConfigError(fmt::format("n_heads ({}) must be a multiple of n_kv_heads ({})", c.n_heads, c.n_kv_heads));
  }
  if (c.head_dim < 0) throw ConfigError(fmt::format("head_dim must be >= 0 (0: dim / n_heads), got {}", c.head_dim));
  if (c.head_dim == 0 && c.dim % c.n_heads != 0) {
    throw ConfigError(fmt::format("head_dim is 0, so dim ({}) must be a multiple of n_heads ({})", c.dim, c.n_heads));
  }
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0.0) {
    throw ConfigError(fmt::format("norm_eps must be finite and > 0, got {}", c.norm_eps));
  }
  if (c.position_encoding == PositionEncoding::kRope && (!std::isfinite(c.rope_theta) || c.rope_theta <= 1.0)) {
    throw ConfigError(fmt::format("rope_theta must be finite and > 1, got {}", c.rope_theta));
  }
  // The parameters, their gradients and AdamW's two moments, float32 each, before anything is allocated.
  const int64_t params = TrainShapeParameterCount(c);
  RequireMemory(SaturatingMul(params, 16),
                fmt::format("the model config (dim {}, hidden_dim {}, n_layers {}, n_heads {}, vocab_size {}, "
                            "max_seq_len {})",
                            c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.vocab_size, c.max_seq_len),
                fmt::format("{} parameters x 4 floats: weights, gradients and two AdamW moments", params));
}

int64_t TrainShapeParameterCount(const TrainShape& c) {
  const int64_t hd = c.resolved_head_dim();
  const int64_t q_dim = SaturatingMul(c.n_heads, hd), kv_dim = SaturatingMul(c.n_kv_heads, hd);
  int64_t layer = SaturatingAdd(SaturatingMul(c.dim, SaturatingAdd(q_dim, SaturatingMul(2, kv_dim))),
                                SaturatingMul(q_dim, c.dim));                       // wq, wk, wv, wo
  layer = SaturatingAdd(layer, SaturatingMul(3, SaturatingMul(c.dim, c.hidden_dim)));  // gate, up, down
  layer = SaturatingAdd(layer, SaturatingMul(2, c.dim));                                // two RMSNorms
  if (c.attention_bias) layer = SaturatingAdd(layer, SaturatingAdd(q_dim, SaturatingMul(2, kv_dim)));
  if (c.qk_norm) layer = SaturatingAdd(layer, SaturatingMul(2, hd));
  int64_t total = SaturatingAdd(SaturatingMul(c.n_layers, layer), c.dim);  // + the final norm
  const int64_t embedding = SaturatingMul(c.vocab_size, c.dim);
  total = SaturatingAdd(total, c.tied_embeddings ? embedding : SaturatingMul(2, embedding));
  if (c.position_encoding == PositionEncoding::kLearned) {
    total = SaturatingAdd(total, SaturatingMul(c.max_seq_len, c.dim));
  }
  return total;
}

TrainShape Stories260KConfig() {
  TrainShape c;
  c.dim = 64;
  c.hidden_dim = 172;
  c.n_layers = 5;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = 512;
  c.max_seq_len = 512;
  return c;
}

PositionEncoding TrainPositionEncoding(const ModelConfig& c) {
  if (c.absolute_positions == AbsolutePositions::kLearned) return PositionEncoding::kLearned;
  if (c.absolute_positions == AbsolutePositions::kSinusoidal) return PositionEncoding::kSinusoidal;
  return !c.layers.empty() && c.layers.front().rope ? PositionEncoding::kRope : PositionEncoding::kNone;
}

void CheckTrainable(const ModelConfig& c, const std::string& source) {
  ValidateModelConfig(c, source);
  auto refuse = [&](const std::string& what) {
    throw ConfigError(fmt::format("{}: the training layers are a Llama block (pre-RMSNorm, SwiGLU, RoPE on every "
                                  "layer or on none); this {} model has {}", source, c.architecture, what));
  };
  if (c.attn_output_bias) refuse("an attention output bias (attention_bias)");
  if (c.norm != NormType::kRms) refuse("LayerNorm");
  if (!c.attn_pre_norm || !c.ffn_pre_norm || c.attn_post_norm || c.ffn_post_norm) refuse("other norm placements");
  if (c.parallel_residual) refuse("a parallel residual");
  if (c.qk_norm == QkNorm::kWhole) refuse("q/k norms over all heads together (OLMo 2)");
  if (!c.gated_ffn || c.activation != Activation::kSilu || c.ffn_bias) refuse("another feed-forward");
  if (c.embedding_scale != 1.0 || c.attn_logit_softcapping || c.final_logit_softcapping || c.query_pre_attn_scalar) {
    refuse("an embedding scale, soft-capping or a query scale");
  }
  if (c.rope_layout != RopeLayout::kInterleaved) {
    refuse("half-split RoPE pairs (the training layers rotate interleaved ones)");
  }
  const bool rope = c.layers.front().rope;
  if (rope && c.absolute_positions != AbsolutePositions::kNone) refuse("RoPE and absolute positions together");
  for (const LayerSpec& l : c.layers) {
    if (l.rope != rope) refuse("layers without RoPE (NoPE) beside layers with RoPE");
    if (l.sliding()) refuse("sliding-window layers");
    if (!l.rope) continue;
    if (!l.rope_freq_factors.empty() || l.rope_magnitude != 1.0) refuse("rope_freqs factors or a RoPE magnitude");
    if (l.rope_params.RotaryDim() != c.head_dim) {
      refuse(fmt::format("rotary_dim {} below head_dim {} (the training layers rotate whole heads)",
                         l.rope_params.RotaryDim(), c.head_dim));
    }
    if (l.rope_params.rope_type != RopeType::kDefault) {
      refuse(fmt::format("RoPE scaling ({}) already; fine-tune an unscaled model",
                         RopeTypeName(l.rope_params.rope_type)));
    }
  }
  if (rope && LayersDiffer(c)) refuse("layers with different RoPE");
}

ModelConfig ToModelConfig(const TrainShape& c, int64_t train_ctx) {
  ModelConfig m;
  m.dim = c.dim;
  m.hidden_dim = c.hidden_dim;
  m.n_layers = c.n_layers;
  m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads;
  m.head_dim = c.resolved_head_dim();
  m.vocab_size = c.vocab_size;
  m.norm_eps = c.norm_eps;
  m.attn_qkv_bias = c.attention_bias;
  m.tied_embeddings = c.tied_embeddings;
  if (c.qk_norm) {
    m.architecture = "qwen3";
    m.qk_norm = QkNorm::kPerHead;
  }
  LayerSpec spec;
  spec.rope = c.position_encoding == PositionEncoding::kRope;
  spec.rope_params.rope_theta = c.rope_theta;
  spec.rope_params.head_dim = m.head_dim;
  spec.rope_params.rotary_dim = m.head_dim;
  spec.rope_params.max_position_embeddings = train_ctx;
  m.layers.assign(static_cast<size_t>(m.n_layers), spec);
  if (c.position_encoding == PositionEncoding::kLearned || c.position_encoding == PositionEncoding::kSinusoidal) {
    m.absolute_positions = c.position_encoding == PositionEncoding::kLearned ? AbsolutePositions::kLearned
                                                                             : AbsolutePositions::kSinusoidal;
    m.n_positions = c.max_seq_len;
  }
  m.rope_layout = RopeLayout::kInterleaved;
  m.train_ctx = train_ctx;
  return m;
}

}  // namespace posenc
