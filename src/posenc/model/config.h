// The hyperparameters of a Llama-family model (Llama 1/2/3, Mistral, TinyLlama, SmolLM, Qwen2), from any of the
// formats posenc reads (GGUF, Hugging Face config.json, llama2.c header).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/rope/layout.h"
#include "posenc/rope/params.h"

namespace posenc {

/// Model families the loader accepts: `llama` (GGUF "llama"; HF LlamaForCausalLM, MistralForCausalLM) and
/// `qwen2` (GGUF "qwen2"; HF Qwen2ForCausalLM: q/k/v projections carry biases).
enum class ModelArchitecture { kLlama, kQwen2 };

/// "llama" or "qwen2".
std::string_view ArchitectureName(ModelArchitecture arch);

/// One Llama-family transformer: pre-RMSNorm blocks of GQA attention with RoPE and a SwiGLU MLP.
struct LlamaConfig {
  ModelArchitecture architecture = ModelArchitecture::kLlama;
  int64_t dim = 0;          // model width: GGUF embedding_length, HF hidden_size
  int64_t hidden_dim = 0;   // SwiGLU inner width: GGUF feed_forward_length, HF intermediate_size
  int64_t n_layers = 0;     // GGUF block_count, HF num_hidden_layers
  int64_t n_heads = 0;      // query heads: GGUF attention.head_count, HF num_attention_heads
  int64_t n_kv_heads = 0;   // key/value heads (GQA when < n_heads): GGUF attention.head_count_kv
  int64_t head_dim = 0;     // channels per head: GGUF attention.key_length / HF head_dim, else dim / n_heads
  int64_t vocab_size = 0;   // rows of the token embedding
  double rms_norm_eps = 0;  // GGUF attention.layer_norm_rms_epsilon, HF rms_norm_eps

  /// The rotary embedding exactly as the file specifies it (the "native" model): rope.rope_theta (GGUF
  /// rope.freq_base), rope.head_dim, rope.rotary_dim (GGUF rope.dimension_count, HF partial rotary), the scaling
  /// type and its parameters (GGUF rope.scaling.*, HF rope_scaling / rope_parameters), and
  /// rope.max_position_embeddings (GGUF context_length, HF max_position_embeddings).
  RopeParams rope;
  /// Pair order of the Q and K projection rows inside each head, which the RoPE rotation must use:
  /// kInterleaved for GGUF `llama` (llama.cpp's NORM rope mode: convert_hf_to_gguf.py permutes HF rows into
  /// it) and llama2.c; kHalfSplit for Hugging Face checkpoints and GGUF `qwen2` (llama.cpp's NEOX mode).
  RopeLayout rope_layout = RopeLayout::kInterleaved;
  /// Per-pair frequency divisors [rotary_dim / 2] from GGUF's `rope_freqs.weight` (Llama 3.1 files): pair i
  /// rotates with inv_freq[i] / rope_freq_factors[i]. Empty when the file has none.
  std::vector<float> rope_freq_factors;
  /// GGUF rope.scaling.attn_factor as written (llama.cpp's YaRN magnitude multiplier); unset when absent.
  std::optional<double> rope_scaling_attn_factor;
  /// Training context length L0, tokens: HF original_max_position_embeddings, GGUF
  /// rope.scaling.original_context_length, else max_position_embeddings / context_length; llama2.c seq_len.
  int64_t train_ctx = 0;

  bool tied_embeddings = false;   // the classifier is the token embedding (GGUF: no output.weight)
  bool attn_qkv_bias = false;     // q, k and v projections add a bias (qwen2)
  bool attn_output_bias = false;  // the output projection adds a bias (HF Llama attention_bias = true)

  int64_t q_dim() const { return n_heads * head_dim; }      // width of q per token
  int64_t kv_dim() const { return n_kv_heads * head_dim; }  // width of k and v per token
};

/// Checks the fields a transformer needs: every size >= 1, n_heads a multiple of n_kv_heads, head_dim even,
/// rotary_dim even and <= head_dim, rms_norm_eps finite and > 0, train_ctx >= 1, rope_freq_factors empty or of
/// rotary_dim / 2 finite positive entries, and ValidateRopeParams(rope).
/// Errors: ConfigError prefixed with `source` (the file), naming the field and the value.
void ValidateLlamaConfig(const LlamaConfig& config, const std::string& source);

}  // namespace posenc
