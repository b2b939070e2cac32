// olmo2: OLMo 2 (Olmo2ForCausalLM): no norm before attention or feed-forward; RMSNorms of their outputs before
// the residual adds (post_attention_layernorm, post_feedforward_layernorm); q and k normed over all heads at once
// (weights [q_dim] and [kv_dim]) before RoPE. GGUF "olmo2" (NEOX rope mode).
// Source: transformers models/olmo2/modeling_olmo2.py; llama.cpp src/models/olmo2.cpp.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void SetBlock(ModelConfig& c) {
  c.rope_layout = RopeLayout::kHalfSplit;
  c.attn_pre_norm = c.ffn_pre_norm = false;
  c.attn_post_norm = c.ffn_post_norm = true;
  c.qk_norm = QkNorm::kWhole;
}

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  SetBlock(c);
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  SetBlock(c);
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-5);
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  LayerSpec spec;
  spec.rope_params = arch::RopeFor(ropes, "full_attention", k.source());
  arch::SetLayers(c, spec);
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kOlmo2Architecture{"olmo2", {"olmo2"}, {"Olmo2ForCausalLM"}, {"olmo2"}, FromGguf, FromHf};

}  // namespace posenc
