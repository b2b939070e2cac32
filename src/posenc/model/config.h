// One description of a decoder-only transformer, whatever file it came from (GGUF, Hugging Face folder, llama2.c
// checkpoint) or whatever trains it: the shape, the block's parts, and a positional spec per layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope/layout.h"
#include "posenc/rope/params.h"

namespace posenc {

/// The normalisation of the residual stream (and of the final hidden state).
enum class NormType {
  kRms,    // RMSNorm: w * x / sqrt(mean(x^2) + eps) (Zhang & Sennrich 2019; Llama)
  kLayer,  // LayerNorm: w * (x - mean) / sqrt(var + eps) + b (Ba et al. 2016; GPT-2, GPT-NeoX)
};

/// The feed-forward activation.
enum class Activation {
  kSilu,      // x * sigmoid(x) (SwiGLU when gated)
  kGeluTanh,  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): HF gelu_new / gelu_pytorch_tanh (GeGLU when gated)
  kGeluErf,   // 0.5 x (1 + erf(x / sqrt(2))): HF gelu
};

/// Norms applied to q and k before RoPE.
enum class QkNorm {
  kNone,
  kPerHead,  // RMSNorm over each head's head_dim channels, one weight [head_dim] (Qwen3, Gemma 3)
  kWhole,    // RMSNorm over all heads together, weights [n_heads * head_dim] / [n_kv_heads * head_dim] (OLMo 2)
};

/// Absolute positions added to the token embeddings before the first block.
enum class AbsolutePositions {
  kNone,        // none (RoPE or NoPE models)
  kLearned,     // a trained table [n_positions, dim] (GPT-2's wpe; posenc train --position-encoding learned)
  kSinusoidal,  // the fixed table of Vaswani et al. 2017 Sec. 3.5 (posenc train --position-encoding sinusoidal)
};

/// "rms" / "layer", "silu" / "gelu-tanh" / "gelu", "none" / "per-head" / "whole", "none" / "learned" /
/// "sinusoidal".
std::string_view NormTypeName(NormType type);
std::string_view ActivationName(Activation activation);
std::string_view QkNormName(QkNorm norm);
std::string_view AbsolutePositionsName(AbsolutePositions positions);

/// How positions enter one layer's attention: the layer's RoPE (or none) and its mask.
struct LayerSpec {
  /// The HF `layer_types` entry: "full_attention" or "sliding_attention".
  std::string type = "full_attention";
  /// false: the layer has no positional encoding of its own (NoPE: SmolLM3's every 4th layer, GPT-2).
  bool rope = true;
  /// The layer's rotary embedding exactly as the file states it (rope_theta, rope_type and its parameters,
  /// head_dim, rotary_dim, max_position_embeddings). Unused when rope is false.
  RopeParams rope_params;
  /// Per-pair divisors [rotary_dim / 2] of inv_freq from GGUF `rope_freqs.weight` (Llama 3.1 files): pair i
  /// turns with inv_freq[i] / rope_freq_factors[i] (ggml_rope_ext freq_factors). Empty when the file has none.
  std::vector<float> rope_freq_factors;
  /// Multiplies cos and sin on top of the rope type's own attention factor: GGUF rope.scaling.attn_factor for a
  /// default or linear RoPE (llama.cpp passes it to ggml_rope_ext as the magnitude; for yarn and longrope it is
  /// folded into rope_params.attention_factor instead). 1 otherwise.
  double rope_magnitude = 1.0;
  /// Sliding-window attention: the query at row i sees keys j with i - W < j <= i (W keys, itself included;
  /// transformers' sliding_window mask, llama.cpp LLAMA_SWA_TYPE_STANDARD). 0: full causal attention.
  int64_t sliding_window = 0;

  bool sliding() const { return sliding_window > 0; }
};

/// Dual Chunk Attention as a model file states it (HF `dual_chunk_attention_config`, Qwen2.5-1M): its chunk_size
/// and local_size (tokens) are the defaults of `--methods dca` (model/position_maps.h, MakeDualChunkMap).
/// Transformers' Qwen2 does not apply it, so `native` runs without it, as there.
struct DualChunkConfig {
  int64_t chunk_size = 0;  // dual_chunk_attention_config.chunk_size
  int64_t local_size = 0;  // dual_chunk_attention_config.local_size
  std::optional<int64_t> original_max_position_embeddings;  // its original_max_position_embeddings, as stated
};

/// A decoder-only transformer. Each block is
///   h = attn_pre_norm ? Norm(x) : x;  a = Attention(h);  a = attn_post_norm ? Norm(a) : a;
///   parallel_residual:  x = x + a + Ffn(Norm_ffn(x))   (GPT-NeoX: both branches read the block's input)
///   else:               x = x + a;  h = ffn_pre_norm ? Norm(x) : x;  f = Ffn(h);
///                       x = x + (ffn_post_norm ? Norm(f) : f)
/// with Attention: q, k, v = W h (+ bias); q, k normed (qk_norm); RoPE on q and k per the layer's LayerSpec;
/// causal (or sliding-window) softmax of q.k * scale, soft-capped when attn_logit_softcapping is set; o = W_o (..)
/// (+ bias); and Ffn: gated ? W_down (act(W_gate h) * W_up h) : W_down act(W_up h + b_up) (+ b_down).
/// The embedding is token_embd[token] * embedding_scale (+ the absolute position row); logits = classifier
/// (Norm(x)), soft-capped when final_logit_softcapping is set.
struct ModelConfig {
  /// The architecture file that read it: "llama", "mistral", "qwen2", "qwen3", "gemma2", "gemma3", "phi3",
  /// "smollm3", "olmo2", "gptneox", "gpt2" (see model/arch/registry.h).
  std::string architecture = "llama";
  int64_t dim = 0;         // model width: GGUF embedding_length, HF hidden_size
  int64_t hidden_dim = 0;  // feed-forward inner width: GGUF feed_forward_length, HF intermediate_size
  int64_t n_layers = 0;    // GGUF block_count, HF num_hidden_layers
  int64_t n_heads = 0;     // query heads: GGUF attention.head_count, HF num_attention_heads
  int64_t n_kv_heads = 0;  // key/value heads (GQA when < n_heads): GGUF attention.head_count_kv
  int64_t head_dim = 0;    // channels per head: GGUF attention.key_length / HF head_dim, else dim / n_heads
  int64_t vocab_size = 0;  // rows of the token embedding

  NormType norm = NormType::kRms;
  double norm_eps = 0;     // GGUF attention.layer_norm_rms_epsilon / layer_norm_epsilon, HF rms_norm_eps / ...
  bool attn_pre_norm = true;     // Norm before attention (every family but OLMo 2)
  bool attn_post_norm = false;   // Norm of the attention output before the residual add (Gemma 2/3, OLMo 2)
  bool ffn_pre_norm = true;      // Norm before the feed-forward
  bool ffn_post_norm = false;    // Norm of the feed-forward output before the residual add (Gemma 2/3, OLMo 2)
  bool parallel_residual = false;  // x + attn(Norm1 x) + ffn(Norm2 x) (GPT-NeoX use_parallel_residual)
  QkNorm qk_norm = QkNorm::kNone;
  Activation activation = Activation::kSilu;
  bool gated_ffn = true;         // act(gate) * up (SwiGLU / GeGLU); false: act(up) (GPT-2, GPT-NeoX)
  bool attn_qkv_bias = false;    // q, k and v projections add a bias (Qwen2, GPT-2, GPT-NeoX)
  bool attn_output_bias = false; // the output projection adds a bias (GPT-2, GPT-NeoX, HF attention_bias)
  bool ffn_bias = false;         // the feed-forward projections add biases (GPT-2, GPT-NeoX)
  bool tied_embeddings = false;  // the classifier is the token embedding (GGUF: no output.weight)
  double embedding_scale = 1.0;  // multiplies the token embedding (Gemma: sqrt(dim))
  /// Attention scores are q.k * s^-1/2 * softmax_scale_multiplier(RoPE) with s = query_pre_attn_scalar when set
  /// (Gemma 2/3), else head_dim (SoftmaxScale).
  std::optional<double> query_pre_attn_scalar;
  std::optional<double> attn_logit_softcapping;   // scores s -> c tanh(s / c) before the softmax (Gemma 2)
  std::optional<double> final_logit_softcapping;  // logits z -> c tanh(z / c) (Gemma 2)

  AbsolutePositions absolute_positions = AbsolutePositions::kNone;
  int64_t n_positions = 0;  // rows of the learned or sinusoidal table (GPT-2 n_positions); 0 when none

  /// Pair order of the Q and K projection rows inside each head, which the RoPE rotation must use:
  /// kInterleaved for llama.cpp's NORM rope mode (GGUF llama, whose converter permutes HF rows into it) and
  /// llama2.c; kHalfSplit for Hugging Face checkpoints and llama.cpp's NEOX mode (GGUF qwen2, gemma, phi3, ...).
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  /// One entry per layer (n_layers): its RoPE (or NoPE) and its attention window.
  std::vector<LayerSpec> layers;
  /// Training context length L0, tokens: HF original_max_position_embeddings, GGUF
  /// rope.scaling.original_context_length, else max_position_embeddings / context_length; llama2.c seq_len.
  int64_t train_ctx = 0;
  /// The file's Dual Chunk Attention configuration, when it has one.
  std::optional<DualChunkConfig> dual_chunk;

  int64_t q_dim() const { return n_heads * head_dim; }      // width of q per token
  int64_t kv_dim() const { return n_kv_heads * head_dim; }  // width of k and v per token
};

/// The RoPE the model's methods scale: that of its first full-attention layer with RoPE (else its first layer
/// with RoPE). nullptr when no layer has RoPE (GPT-2, NoPE models).
const LayerSpec* PrimaryRopeLayer(const ModelConfig& config);

/// True if two layers have the same type, RoPE (every parameter, factors, magnitude) or NoPE, and window.
bool SamePositionalSpec(const LayerSpec& a, const LayerSpec& b);

/// True if some layer differs from layer 0 in its RoPE, NoPE flag or window (then inspect prints per type).
bool LayersDiffer(const ModelConfig& config);

/// Checks the fields a transformer needs: every size >= 1, n_heads a multiple of n_kv_heads, head_dim even when
/// a layer has RoPE, norm_eps finite and > 0, train_ctx >= 1, embedding_scale finite and > 0,
/// query_pre_attn_scalar and softcaps finite and > 0, layers.size() == n_layers, and per layer: sliding_window >= 0,
/// rope_params.head_dim == head_dim, rotary_dim even and <= head_dim, ValidateRopeParams(rope_params),
/// rope_freq_factors empty or rotary_dim / 2 finite positive entries; learned / sinusoidal positions with
/// n_positions >= 1; dual_chunk with local_size >= 0 and chunk_size > local_size.
/// Errors: ConfigError prefixed with `source` (the file), naming the field (with the layer) and the value.
void ValidateModelConfig(const ModelConfig& config, const std::string& source);

}  // namespace posenc
