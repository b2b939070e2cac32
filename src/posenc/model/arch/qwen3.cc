// qwen3: Qwen3 dense models (Qwen3ForCausalLM): a Llama block with an RMSNorm over each head of q and of k
// (weights [head_dim]) before RoPE, head_dim from the config (128 where hidden_size / n_heads is not), sliding
// layers as Qwen2. GGUF "qwen3" (NEOX rope mode; attn_q_norm / attn_k_norm).
// Source: transformers models/qwen3/modeling_qwen3.py (Qwen3Attention q_norm, k_norm); llama.cpp src/models/qwen3.cpp.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;  // llama.cpp LLAMA_ROPE_TYPE_NEOX
  c.qk_norm = QkNorm::kPerHead;
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  c.qk_norm = QkNorm::kPerHead;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6);
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  arch::ReadHfQwenLayers(k, c, ropes, notes);
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kQwen3Architecture{"qwen3", {"qwen3"}, {"Qwen3ForCausalLM"}, {"qwen3"}, FromGguf, FromHf};

}  // namespace posenc
