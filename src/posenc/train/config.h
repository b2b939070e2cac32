// The shape keys of a model the training code builds (`posenc train --config`, or a model file to fine-tune) and
// which positional encoding it uses. The model itself is the one ModelConfig (model/config.h) that ToModelConfig
// builds from them: the training model, its parameter layout, its checkpoints and the inference forward all read
// that ModelConfig.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "posenc/model/config.h"

namespace posenc {

/// How token positions enter the model.
enum class PositionEncoding {
  kRope,        // rotary embedding of q and k in every attention layer (the cos/sin table comes with each call)
  kSinusoidal,  // fixed sinusoidal table added to the token embeddings (Vaswani et al. 2017, Sec. 3.5)
  kLearned,     // trained table added to the token embeddings (GPT-2's wpe), max_seq_len rows
  kNone,        // no positional information (the causal mask alone)
};

/// "rope", "sinusoidal", "learned", "none".
std::string_view PositionEncodingName(PositionEncoding encoding);

/// Parses one of the names above. Errors: ConfigError "position_encoding must be one of rope, sinusoidal,
/// learned, none, got 'x'".
PositionEncoding ParsePositionEncoding(std::string_view name);

/// The shape of a new model as `posenc train --config` states it (the JSON mapping, config_json.h), or of a model
/// file to fine-tune: a decoder of the Llama family (pre-norm RMSNorm, attention with GQA, SwiGLU feed-forward).
/// Field names follow llama2.c's Config; the HF / GGUF name is in the comment. Its JSON, as stated, identifies the
/// model in a training state (TrainModelKey).
struct TrainShape {
  int64_t dim = 0;           // model width (HF hidden_size, GGUF embedding_length)
  int64_t hidden_dim = 0;    // feed-forward width (intermediate_size, feed_forward_length)
  int64_t n_layers = 0;      // blocks (num_hidden_layers, block_count)
  int64_t n_heads = 0;       // query heads (num_attention_heads, attention.head_count)
  int64_t n_kv_heads = 0;    // key/value heads (num_key_value_heads, attention.head_count_kv); divides n_heads
  int64_t head_dim = 0;      // channels per head (head_dim, attention.key_length); 0: dim / n_heads
  int64_t vocab_size = 0;    // token ids [0, vocab_size)
  int64_t max_seq_len = 0;   // tokens: the longest window trained on; rows of the learned / sinusoidal table
  double norm_eps = 1e-5;    // RMSNorm epsilon (rms_norm_eps, attention.layer_norm_rms_epsilon)
  bool attention_bias = false;   // biases on q, k and v (Qwen2 style; attention_bias)
  bool tied_embeddings = true;   // the classifier is the token embedding table (tie_word_embeddings)
  bool qk_norm = false;          // RMSNorm over each head of q and k before RoPE (Qwen3 q_norm / k_norm)
  PositionEncoding position_encoding = PositionEncoding::kRope;
  double rope_theta = 10000.0;  // RoPE base (HF rope_theta, GGUF rope.freq_base); llama2.c's 10000 by default

  /// head_dim, or dim / n_heads when it is 0.
  int64_t resolved_head_dim() const { return head_dim != 0 ? head_dim : (n_heads > 0 ? dim / n_heads : 0); }
  int64_t q_dim() const { return n_heads * resolved_head_dim(); }      // width of all query heads
  int64_t kv_dim() const { return n_kv_heads * resolved_head_dim(); }  // width of all key (or value) heads
};

/// The model config of a training shape, which the method tables (BuildMethodRope) and the transformer read:
/// its sizes, norm_eps, tied classifier, q/k/v biases and per-head q/k norm (architecture "qwen3" then, else
/// "llama"); every layer with RoPE of type default at the config's rope_theta over whole heads (rotary_dim = head_dim) in interleaved pairs (llama2.c's order, which the training
/// layers use) for kRope, else NoPE layers with learned / sinusoidal absolute positions of max_seq_len rows (or
/// none); train_ctx = max_position_embeddings = `train_ctx` (L0, tokens). No errors: the caller validated
/// `config` (ValidateTrainShape).
ModelConfig ToModelConfig(const TrainShape& config, int64_t train_ctx);

/// How positions enter a model the training layers run: kLearned / kSinusoidal for that absolute table, else
/// kRope when its layers have RoPE, else kNone. Errors: none.
PositionEncoding TrainPositionEncoding(const ModelConfig& config);

/// Checks that the training layers implement `config` (ValidateModelConfig first): a Llama block (pre-RMSNorm,
/// SwiGLU without biases, no output bias, no post-norms, parallel residual, embedding scale or soft-capping; q/k
/// RMSNorm per head (Qwen3) or none), every layer with the same unscaled RoPE over whole heads in interleaved
/// pairs or every layer NoPE (with learned, sinusoidal or no absolute positions), no sliding window, no
/// rope_freqs factors or magnitude.
/// Errors: ConfigError prefixed with `source`, naming the architecture and what the training layers lack.
void CheckTrainable(const ModelConfig& config, const std::string& source);

/// Checks a config. Errors: ConfigError naming the field and value if dim, hidden_dim, n_layers, n_heads,
/// n_kv_heads, vocab_size or max_seq_len is < 1, n_heads is not a multiple of n_kv_heads, head_dim is < 0
/// (or, when 0, dim is not a multiple of n_heads), norm_eps is not finite and > 0, or rope_theta is not finite
/// and > 1 (RoPE models); ConfigError from RequireMemory naming the sizes when the parameters with their
/// gradients and AdamW moments (16 bytes per parameter, TrainShapeParameterCount) exceed the machine's memory.
void ValidateTrainShape(const TrainShape& config);

/// Parameters of a model of this shape: per layer wq, wk, wv, wo, the three feed-forward matrices, two norm
/// weights (and q/k/v biases, per-head q/k norms when set), the final norm, the token embedding (twice when the
/// classifier is untied) and a learned position table. Saturates at INT64_MAX. Errors: none.
int64_t TrainShapeParameterCount(const TrainShape& config);

/// stories260K's shape (llama2.c "tinyllamas" stories260K: dim 64, hidden_dim 172, 5 layers, 8 heads, 4 kv
/// heads, vocab 512, trained at 512 tokens), tied embeddings, RoPE.
TrainShape Stories260KConfig();

}  // namespace posenc
