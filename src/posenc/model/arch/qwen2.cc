// qwen2: Qwen2, Qwen2.5 (Qwen2ForCausalLM): a Llama block whose q, k and v projections carry biases; with
// use_sliding_window, layers from max_window_layers on attend within sliding_window (or as layer_types says).
// GGUF "qwen2" (llama.cpp's NEOX rope mode, no window). A dual_chunk_attention_config (Qwen2.5-1M) is read for
// --methods dca.
// Source: transformers models/qwen2/configuration_qwen2.py (layer_types from use_sliding_window and
// max_window_layers), modeling_qwen2.py; llama.cpp src/models/qwen2.cpp.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;  // llama.cpp LLAMA_ROPE_TYPE_NEOX
  c.attn_qkv_bias = true;
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  if (k.Bool("use_mrope", false)) {
    throw ConfigError(fmt::format("{}: use_mrope = true (multimodal RoPE of Qwen2-VL) is not supported", k.source()));
  }
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6);
  c.attn_qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  arch::ReadHfQwenLayers(k, c, ropes, notes);
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfDualChunk(k, c, notes);
  // Qwen2.5-1M states its pretraining length only in dual_chunk_attention_config (max_position_embeddings is the
  // extended 1010000): L0 unless the rope configuration states one itself.
  const LayerSpec* primary = PrimaryRopeLayer(c);
  if (c.dual_chunk && c.dual_chunk->original_max_position_embeddings && !k.Has("original_max_position_embeddings") &&
      !(primary != nullptr && primary->rope_params.original_max_position_embeddings)) {
    notes.Add(fmt::format("L0 = {}: dual_chunk_attention_config.original_max_position_embeddings (max_position_"
                          "embeddings is {})", *c.dual_chunk->original_max_position_embeddings, c.train_ctx));
    c.train_ctx = *c.dual_chunk->original_max_position_embeddings;
  }
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kQwen2Architecture{"qwen2", {"qwen2"}, {"Qwen2ForCausalLM"}, {"qwen2"}, FromGguf, FromHf};

}  // namespace posenc
