#include "posenc/model/config.h"

#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

std::string_view NormTypeName(NormType type) { return type == NormType::kRms ? "rms" : "layer"; }

std::string_view ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kSilu: return "silu";
    case Activation::kGeluTanh: return "gelu-tanh";
    case Activation::kGeluErf: return "gelu";
  }
  return "unknown";
}

std::string_view QkNormName(QkNorm norm) {
  switch (norm) {
    case QkNorm::kNone: return "none";
    case QkNorm::kPerHead: return "per-head";
    case QkNorm::kWhole: return "whole";
  }
  return "unknown";
}

std::string_view AbsolutePositionsName(AbsolutePositions positions) {
  switch (positions) {
    case AbsolutePositions::kNone: return "none";
    case AbsolutePositions::kLearned: return "learned";
    case AbsolutePositions::kSinusoidal: return "sinusoidal";
  }
  return "unknown";
}

const LayerSpec* PrimaryRopeLayer(const ModelConfig& config) {
  const LayerSpec* first = nullptr;
  for (const LayerSpec& l : config.layers) {
    if (!l.rope) continue;
    if (!l.sliding()) return &l;
    if (first == nullptr) first = &l;
  }
  return first;
}

namespace {

bool SameRope(const RopeParams& a, const RopeParams& b) {
  return a.rope_type == b.rope_type && a.rope_theta == b.rope_theta && a.head_dim == b.head_dim &&
         a.RotaryDim() == b.RotaryDim() && a.max_position_embeddings == b.max_position_embeddings &&
         a.factor == b.factor && a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.attention_factor == b.attention_factor && a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow &&
         a.mscale == b.mscale && a.mscale_all_dim == b.mscale_all_dim && a.truncate == b.truncate &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.short_factor == b.short_factor && a.long_factor == b.long_factor;
}

}  // namespace

bool SamePositionalSpec(const LayerSpec& a, const LayerSpec& b) {
  return a.type == b.type && a.rope == b.rope && a.sliding_window == b.sliding_window &&
         (!a.rope || (a.rope_freq_factors == b.rope_freq_factors && a.rope_magnitude == b.rope_magnitude &&
                      SameRope(a.rope_params, b.rope_params)));
}

bool LayersDiffer(const ModelConfig& config) {
  for (const LayerSpec& l : config.layers) {
    if (!SamePositionalSpec(l, config.layers.front())) return true;
  }
  return false;
}

void ValidateModelConfig(const ModelConfig& c, const std::string& source) {
  auto fail = [&](const std::string& what) { throw ConfigError(fmt::format("{}: {}", source, what)); };
  const std::pair<const char*, int64_t> sizes[] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim},
                                                   {"n_layers", c.n_layers}, {"n_heads", c.n_heads},
                                                   {"n_kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim},
                                                   {"vocab_size", c.vocab_size}, {"train_ctx", c.train_ctx}};
  for (const auto& [field, value] : sizes) {
    if (value < 1) fail(fmt::format("{} must be >= 1, got {}", field, value));
  }
  if (c.n_heads % c.n_kv_heads != 0) {
    fail(fmt::format("n_heads must be a multiple of n_kv_heads, got n_heads={} n_kv_heads={}", c.n_heads,
                     c.n_kv_heads));
  }
  if (!std::isfinite(c.norm_eps) || c.norm_eps <= 0) {
    fail(fmt::format("norm_eps (the norm epsilon) must be finite and > 0, got {}", c.norm_eps));
  }
  if (!std::isfinite(c.embedding_scale) || c.embedding_scale <= 0) {
    fail(fmt::format("embedding_scale must be finite and > 0, got {}", c.embedding_scale));
  }
  for (const auto& [field, cap] : {std::pair<const char*, std::optional<double>>{"attn_logit_softcapping",
                                                                                 c.attn_logit_softcapping},
                                   {"final_logit_softcapping", c.final_logit_softcapping},
                                   {"query_pre_attn_scalar", c.query_pre_attn_scalar}}) {
    if (cap && !(std::isfinite(*cap) && *cap > 0)) fail(fmt::format("{} must be finite and > 0, got {}", field, *cap));
  }
  if (c.absolute_positions != AbsolutePositions::kNone && c.n_positions < 1) {
    fail(fmt::format("{} positions need n_positions >= 1, got {}", AbsolutePositionsName(c.absolute_positions),
                     c.n_positions));
  }
  if (c.dual_chunk && !(c.dual_chunk->local_size >= 0 && c.dual_chunk->chunk_size > c.dual_chunk->local_size)) {
    fail(fmt::format("dual_chunk_attention_config needs local_size >= 0 and chunk_size > local_size, got chunk_size "
                     "{} and local_size {}", c.dual_chunk->chunk_size, c.dual_chunk->local_size));
  }
  if (static_cast<int64_t>(c.layers.size()) != c.n_layers) {
    fail(fmt::format("the model has n_layers = {} but {} layer specs", c.n_layers, c.layers.size()));
  }
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& l = c.layers[i];
    if (l.sliding_window < 0) fail(fmt::format("layer {}: sliding_window must be >= 0, got {}", i, l.sliding_window));
    if (!l.rope) continue;
    if (c.head_dim % 2 != 0) fail(fmt::format("head_dim must be even for RoPE, got {}", c.head_dim));
    if (l.rope_params.head_dim != c.head_dim) {
      fail(fmt::format("layer {}: rope head_dim {} differs from head_dim {}", i, l.rope_params.head_dim, c.head_dim));
    }
    try {
      ValidateRopeParams(l.rope_params);
    } catch (const ConfigError& e) {
      fail(fmt::format("layer {}: {}", i, e.what()));
    }
    const int64_t rotary_dim = l.rope_params.RotaryDim();
    if (!l.rope_freq_factors.empty()) {
      if (static_cast<int64_t>(l.rope_freq_factors.size()) != rotary_dim / 2) {
        fail(fmt::format("rope_freqs must have rotary_dim / 2 = {} entries, got {}", rotary_dim / 2,
                         l.rope_freq_factors.size()));
      }
      for (size_t k = 0; k < l.rope_freq_factors.size(); ++k) {
        const float f = l.rope_freq_factors[k];
        if (!std::isfinite(f) || f <= 0) fail(fmt::format("rope_freqs[{}] must be finite and > 0, got {}", k, f));
      }
    }
  }
}

}  // namespace posenc
