// One entry point for model files: a GGUF file, a Hugging Face checkpoint folder or a llama2.c checkpoint in,
// a validated LlamaConfig and named tensor views (no copies) out.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/formats/gguf.h"
#include "posenc/formats/mapped_file.h"
#include "posenc/formats/safetensors.h"
#include "posenc/formats/tensor_view.h"
#include "posenc/model/config.h"

namespace posenc {

/// The container a model came in.
enum class ModelFormat { kGguf, kHuggingFace, kLlama2c };

/// "gguf", "hf" or "llama2.c".
std::string_view ModelFormatName(ModelFormat format);

/// The tensors of one transformer block. Shapes are row-major [out, in] (see TensorView).
struct LayerTensors {
  TensorView attn_norm;          // [dim]
  TensorView wq;                 // [n_heads * head_dim, dim]; rows in the config's rope_layout pair order
  TensorView wk;                 // [n_kv_heads * head_dim, dim]; same row order as wq
  TensorView wv;                 // [n_kv_heads * head_dim, dim]
  TensorView wo;                 // [dim, n_heads * head_dim]
  std::optional<TensorView> bq;  // [n_heads * head_dim] when attn_qkv_bias
  std::optional<TensorView> bk;  // [n_kv_heads * head_dim] when attn_qkv_bias
  std::optional<TensorView> bv;  // [n_kv_heads * head_dim] when attn_qkv_bias
  std::optional<TensorView> bo;  // [dim] when attn_output_bias
  TensorView ffn_norm;           // [dim]
  TensorView w1;                 // gate [hidden_dim, dim]
  TensorView w2;                 // down [dim, hidden_dim]
  TensorView w3;                 // up [hidden_dim, dim]
};

/// Every tensor the model uses.
struct ModelTensors {
  TensorView token_embd;             // [vocab_size, dim]
  TensorView output_norm;            // [dim]
  std::optional<TensorView> output;  // [vocab_size, dim]; absent when tied_embeddings
  std::vector<LayerTensors> layers;  // [n_layers]

  /// The classifier [vocab_size, dim]: `output`, or the token embedding when tied.
  const TensorView& classifier() const { return output ? *output : token_embd; }
};

/// What the one-line load message shows.
struct ModelFileSummary {
  std::string format;                     // "GGUF v3", "HF safetensors (1 file)", "llama2.c"
  std::string architecture;               // "llama", "qwen2"
  int64_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab_size = 0;
  std::map<std::string, int> tensor_types;  // ggml type name -> number of tensors the model uses
  int64_t train_ctx = 0;                  // L0, tokens
  double rope_theta = 0;
  std::string rope_scaling;               // "none", "linear x4", "yarn x4 (L0 8192)", "+ rope_freqs"
  std::string rope_layout;                // "interleaved" or "half-split"
};

/// One line for the log, e.g. "GGUF v3 llama: dim 256, 2 layers, 4 heads x head_dim 64, 2 kv heads, ffn 704,
/// vocab 32000; tensors f32 x5, q8_0 x15; L0 2048; RoPE base 10000, scaling none, interleaved rows".
std::string SummaryLine(const ModelFileSummary& summary);

/// A loaded model file: config and tensor views. The views point into `files`, which this object keeps mapped.
struct ModelFile {
  std::string path;
  ModelFormat format = ModelFormat::kGguf;
  std::string format_detail;  // "GGUF v3", "HF safetensors (2 files)", "llama2.c"
  LlamaConfig config;
  ModelTensors tensors;
  std::vector<std::string> warnings;  // keys read but not used, defaults applied, tensors the model ignores
  std::vector<std::shared_ptr<const MappedFile>> files;

  ModelFileSummary Summary() const;
};

/// kHuggingFace for a directory; kGguf for a file starting with "GGUF"; kLlama2c for any other regular file.
/// Errors: IoError naming the path if it does not exist or is neither a directory nor a regular file.
ModelFormat DetectModelFormat(const std::string& path);

/// Loads a model file of any supported format (DetectModelFormat), then checks every tensor the model uses.
///
/// Errors: as the readers (IoError for bytes that break the format; IoError for a path to a lone .safetensors
///   or .json file, which needs its checkpoint folder); ConfigError naming the file and the
///   key/tensor and the value for: an unsupported architecture (GGUF other than llama/qwen2; HF other than
///   LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM); a missing required key (GGUF
///   general.architecture, {arch}.embedding_length, block_count, feed_forward_length, attention.head_count,
///   context_length, attention.layer_norm_rms_epsilon; HF hidden_size, intermediate_size, num_hidden_layers,
///   num_attention_heads, vocab_size, max_position_embeddings) or one of the wrong type; an unknown
///   rope.scaling.type; a missing required tensor; a tensor whose shape differs from the config's (named, with
///   both shapes); a tensor type DequantizeRow cannot read (named, with its type); HF hidden_act other than
///   silu or mlp_bias true; and everything ValidateLlamaConfig rejects.
/// Source: llama.cpp src/llama-model.cpp (LLM_ARCH_LLAMA / LLM_ARCH_QWEN2 hparams and tensors, rope types NORM /
///   NEOX); transformers LlamaConfig / Qwen2Config / MistralConfig defaults; llama2.c run.c.
ModelFile LoadModelFile(const std::string& path);

/// The same for an already parsed GGUF file (e.g. bytes in memory).
ModelFile LoadGgufModel(const GgufFile& gguf);

/// The same for an opened Hugging Face checkpoint folder.
ModelFile LoadHfModel(const HfCheckpoint& checkpoint);

/// The same for the bytes of a llama2.c checkpoint (validated by ParseCheckpointHeader).
ModelFile LoadLlama2cModel(std::shared_ptr<const MappedFile> file);

}  // namespace posenc
