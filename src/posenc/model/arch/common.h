// What the architecture files share: llama.cpp's hyperparameter keys and tensor names, transformers' config keys
// and module names, and the ways a family's layers get their positional specs.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "posenc/model/arch/arch.h"

namespace posenc::arch {

// ---- GGUF (llama.cpp) ----------------------------------------------------------------------------------------

/// The shape keys every llama.cpp architecture has: embedding_length, block_count, feed_forward_length,
/// attention.head_count, attention.head_count_kv (default head_count), attention.key_length (default
/// embedding_length / head_count; value_length must equal it), and the norm epsilon:
/// attention.layer_norm_rms_epsilon for kRms configs, attention.layer_norm_epsilon for kLayer ones; and
/// context_length into config.train_ctx. Errors: ConfigError naming the key and the value.
void ReadGgufShape(GgufKeys& keys, ModelConfig& config);

/// The rotary embedding llama.cpp builds from the file's keys (llama-model.cpp load_hparams, llama-context.cpp
/// cparams, ggml rope_yarn): rope.freq_base (`freq_base_key`; absent: 10000, noted), rope.dimension_count
/// (default head_dim), rope.scaling.type (absent: linear, as llama.cpp's default; none/linear/yarn/longrope),
/// rope.scaling.factor (or the old rope.scale_linear), rope.scaling.original_context_length,
/// rope.scaling.attn_factor, yarn_beta_fast / yarn_beta_slow / yarn_ext_factor / yarn_log_multiplier,
/// rope.scaling.finetuned (read and shown; it changes nothing at inference). Every value is checked finite and
/// in range. `scaled` false: the layer type takes no scaling (llama.cpp's sliding layers of Gemma 3).
/// Errors: ConfigError naming the key and the value (a scaling type llama.cpp does not know, a factor < 1, an
/// attn_factor <= 0, a yarn_ext_factor other than 0 or 1, ...).
/// Fills spec.rope_params and spec.rope_magnitude.
void ReadGgufRope(GgufKeys& keys, const ModelConfig& config, LoadNotes& notes, LayerSpec& spec,
                  const char* freq_base_key = "rope.freq_base", bool scaled = true);

/// llama.cpp's per-pair RoPE tensors: rope_freqs.weight (Llama 3.1: divisors of inv_freq, into
/// spec.rope_freq_factors) and rope_factors_long/short.weight (LongRoPE: the long and short factors; the spec
/// becomes longrope with L0 = original_context_length and the attn_factor as its attention factor), each checked
/// to be a vector of rotary_dim / 2 finite values and recorded in out.also_used. A longrope scaling type without
/// the factor tensors is an error naming the key.
void ReadGgufRopeFactors(GgufKeys& keys, TensorSource& tensors, ModelTensors& out, LayerSpec& spec);

/// Every layer the same spec.
void SetLayers(ModelConfig& config, const LayerSpec& spec);

/// GGUF `{arch}.attention.sliding_window` (>= 1) if present.
std::optional<int64_t> GgufSlidingWindow(GgufKeys& keys);

/// The tensors under llama.cpp's standard names (llama-arch.cpp LLM_TENSOR_NAMES): token_embd, position_embd,
/// output_norm (+ .bias for LayerNorm), output (absent: tied), and per block attn_norm, attn_q / attn_k /
/// attn_v or a fused attn_qkv ([Q; K; V] rows), their biases, attn_q_norm / attn_k_norm, attn_output,
/// post_attention_norm, ffn_norm, ffn_gate, ffn_up, ffn_down (+ biases), post_ffw_norm — each taken exactly
/// when the config says the block has that part. Sets tied_embeddings from the file and vocab_size from
/// token_embd. Errors: ConfigError naming a missing tensor.
void ReadGgufTensors(TensorSource& tensors, ModelConfig& config, ModelTensors& out);

// ---- Hugging Face (transformers) -----------------------------------------------------------------------------

/// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads (default
/// num_attention_heads), vocab_size, head_dim (null or absent: hidden_size / num_attention_heads),
/// tie_word_embeddings (default `tie_default`) and the norm epsilon `eps_key` (absent: `eps_default`, noted).
void ReadHfShape(HfKeys& keys, ModelConfig& config, LoadNotes& notes, const char* eps_key = "rms_norm_eps",
                 double eps_default = 1e-6, bool tie_default = false);

/// The rotary embedding of each layer type, with transformers' semantics: v4 `rope_scaling` + `rope_theta`, v5
/// `rope_parameters` flat or nested per layer type ({"full_attention": {...}, "sliding_attention": {...}}),
/// `partial_rotary_factor` inside or outside it, head_dim, max_position_embeddings and
/// original_max_position_embeddings where transformers reads them. Keys a rope type does not use are errors.
/// The map has the key "" for a flat config (every layer type), else one entry per layer type given.
/// Errors: ConfigError naming the file, the key and the value (everything ParseHfRopeConfig refuses).
std::map<std::string, RopeParams> ReadHfRope(HfKeys& keys, LoadNotes& notes);

/// The RoPE of layer type `type` from ReadHfRope's map. Errors: ConfigError if the map has neither the type nor "".
const RopeParams& RopeFor(const std::map<std::string, RopeParams>& ropes, const std::string& type,
                          const std::string& source);

/// config.json `layer_types` ([n_layers] of "full_attention" / "sliding_attention") when given, else nullopt.
/// Errors: ConfigError for a list of another length or an unknown entry.
std::optional<std::vector<std::string>> ReadHfLayerTypes(HfKeys& keys, int64_t n_layers);

/// Qwen2 / Qwen3 layers (configuration_qwen2.py): layer_types when given, else "sliding_attention" for layer i
/// >= max_window_layers when use_sliding_window and sliding_window are set; sliding layers get sliding_window.
/// Fills config.layers (RoPE per layer type from `ropes`). A sliding layer type without use_sliding_window and
/// sliding_window attends fully (Qwen2Config drops the window), noted.
void ReadHfQwenLayers(HfKeys& keys, ModelConfig& config, const std::map<std::string, RopeParams>& ropes,
                      LoadNotes& notes);

/// config.dual_chunk from `dual_chunk_attention_config` when present (Qwen2.5-1M; vLLM's Qwen2 reads it):
/// chunk_size and local_size required, original_max_position_embeddings optional (qwen2 takes it as L0 when the
/// rope configuration states none); its sparse_attention_* keys
/// (MInference's sparse prefill, a speed approximation) are noted and not applied.
/// Errors: ConfigError naming the file and the key: not an object, chunk_size / local_size missing or not an
///   integer in range (chunk_size >= 1, local_size >= 0), or a key posenc does not know.
void ReadHfDualChunk(HfKeys& keys, ModelConfig& config, LoadNotes& notes);

/// L0 as transformers' rope code uses it: the primary RoPE layer's original_max_position_embeddings when its type
/// has one, else a top-level original_max_position_embeddings, else max_position_embeddings (required). config.layers must be filled.
int64_t HfTrainCtx(HfKeys& keys, const ModelConfig& config);

/// Module names of a Llama-like transformers model.
struct HfNames {
  std::string layer = "model.layers.{}.";           // {} = layer index
  std::string embed = "model.embed_tokens.weight";
  std::string norm = "model.norm";                  // + ".weight" / ".bias"
  std::string lm_head = "lm_head.weight";
  std::string attn_norm = "input_layernorm";
  std::string q = "self_attn.q_proj", k = "self_attn.k_proj", v = "self_attn.v_proj", o = "self_attn.o_proj";
  std::string q_norm = "self_attn.q_norm", k_norm = "self_attn.k_norm";
  std::string attn_post_norm = "post_attention_layernorm";  // Gemma / OLMo 2: after attention
  std::string ffn_norm = "post_attention_layernorm";        // Llama: before the MLP
  std::string ffn_post_norm = "post_feedforward_layernorm";
  std::string gate = "mlp.gate_proj", up = "mlp.up_proj", down = "mlp.down_proj";
};

/// Gemma 2/3 module names: sandwich norms (input_layernorm, post_attention_layernorm, pre_feedforward_layernorm,
/// post_feedforward_layernorm).
HfNames GemmaHfNames();

/// The Gemma block parts shared by Gemma 2 and 3: (1 + w) RMSNorms before and after attention and feed-forward,
/// GeGLU with the tanh GELU (hidden_activation / hidden_act gelu_pytorch_tanh), embeddings times sqrt(dim),
/// half-split RoPE pairs. Errors: ConfigError for another activation.
void SetGemmaBlock(ModelConfig& config);
void CheckGemmaActivation(HfKeys& keys);

/// llama.cpp's Gemma query scale (llama-model.cpp f_attention_scale) as the s of s^-1/2: dim / n_heads for the
/// 27B models (`big_layers` layers), else head_dim.
double GgufGemmaQueryScalar(const ModelConfig& config, int64_t big_layers);

/// The tensors of a Llama-like folder under `names`, each taken exactly when the config says the block has
/// that part (norms with `plus_one` for Gemma's (1 + w)). Errors: ConfigError naming a missing tensor.
void ReadHfTensors(TensorSource& tensors, const ModelConfig& config, ModelTensors& out, const HfNames& names,
                   bool norm_plus_one = false);

}  // namespace posenc::arch
