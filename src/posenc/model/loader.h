// One entry point for model files: a GGUF file, a Hugging Face checkpoint folder or a llama2.c checkpoint in, a
// validated ModelConfig (a LayerSpec per layer) and the tensors by role out. The architecture files
// (model/arch/) know each family; this file finds the family, then checks what every family must satisfy.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/formats/gguf.h"
#include "posenc/formats/mapped_file.h"
#include "posenc/formats/safetensors.h"
#include "posenc/model/config.h"
#include "posenc/model/tensors.h"

namespace posenc {

/// The container a model came in.
enum class ModelFormat { kGguf, kHuggingFace, kLlama2c };

/// "gguf", "hf" or "llama2.c".
std::string_view ModelFormatName(ModelFormat format);

/// How strict the loader is.
struct LoadOptions {
  /// Tensors of the file that the model does not use are an error (a file with more layers than its
  /// block_count says would otherwise run with some of them dropped); true turns the error into a warning.
  bool allow_unused_tensors = false;
};

/// What the one-line load message shows.
struct ModelFileSummary {
  std::string format;        // "GGUF v3", "HF safetensors (1 file)", "llama2.c"
  std::string architecture;  // "llama", "gemma3", ...
  int64_t dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, vocab_size = 0;
  std::map<std::string, int> tensor_types;  // ggml type name -> number of tensors the model uses
  int64_t train_ctx = 0;                    // L0, tokens
  double rope_theta = 0;                    // the primary RoPE layer's base (0: no RoPE layer)
  std::string rope_scaling;                 // "none", "linear x4", "yarn x4 (L0 8192)", "+ rope_freqs"
  std::string rope_layout;                  // "interleaved" or "half-split"
  std::string positions;                    // per layer type when layers differ, e.g. "4 layers: 3 sliding 32 ..."
};

/// A layer's RoPE scaling in words, as the summary shows it: "none", "yarn x4", "linear x2, magnitude 0.5",
/// "+ rope_freqs", ", rotary_dim 32".
std::string RopeScalingText(const LayerSpec& layer);

/// One line for the log, e.g. "GGUF v3 llama: dim 256, 2 layers, 4 heads x head_dim 64, 2 kv heads, ffn 704,
/// vocab 32000; tensors f32 x5, q8_0 x15; L0 2048; RoPE base 10000, scaling none, interleaved rows".
std::string SummaryLine(const ModelFileSummary& summary);

/// The model's layers grouped by positional spec (type, RoPE or NoPE, window): a description of the spec, e.g.
/// "(sliding_attention): RoPE theta 10000, scaling none, window 32", and the layers that have it.
struct LayerGroup {
  std::string description;
  std::vector<int64_t> layers;
};
std::vector<LayerGroup> GroupLayers(const ModelConfig& config);

/// One line per distinct positional spec of the model's layers, e.g. "layers 0, 1, 3 (sliding_attention):
/// RoPE theta 10000 default, window 32" or "layer 3 (full_attention): NoPE".
std::vector<std::string> DescribeLayers(const ModelConfig& config);

/// A loaded model file: config and tensor views. The views point into `files` (or own derived bytes), which this
/// object keeps mapped.
struct ModelFile {
  std::string path;
  ModelFormat format = ModelFormat::kGguf;
  std::string format_detail;  // "GGUF v3", "HF safetensors (2 files)", "llama2.c"
  ModelConfig config;
  ModelTensors tensors;
  /// Defaults applied for absent keys, details the file states that its format's runtime does not apply, and
  /// (with allow_unused_tensors) the tensors the model ignores.
  std::vector<std::string> warnings;
  std::vector<std::shared_ptr<const MappedFile>> files;

  ModelFileSummary Summary() const;
};

/// kHuggingFace for a directory; kGguf for a file starting with "GGUF" or named *.gguf (a damaged one is then
/// refused by the GGUF reader, naming the damage); kLlama2c for any other regular file.
/// Errors: IoError naming the path if it does not exist or is neither a directory nor a regular file.
ModelFormat DetectModelFormat(const std::string& path);

/// Loads a model file of any supported format (DetectModelFormat), then checks the config and every tensor.
///
/// Errors: as the readers (IoError for bytes that break the format; IoError for a path to a lone .safetensors
///   or .json file, which needs its checkpoint folder); ConfigError naming the file and the key/tensor and the
///   value for: an architecture posenc does not read (mixture-of-experts, vision and state-space families are
///   named as such); a missing or mistyped required key; a positional key the architecture does not apply
///   (GGUF {arch}.rope.*, attention.sliding_window*; HF rope_*, sliding_window, layer_types, ...); a missing
///   required tensor; a tensor whose shape differs from the config's (named, with both shapes); tensors of
///   layers past block_count / num_hidden_layers; tensors the model does not use (unless allowed); a tensor
///   type DequantizeRow cannot read; and everything ValidateModelConfig rejects.
/// Source: llama.cpp src/llama-model.cpp (hparams, tensors, rope types NORM / NEOX, a tensor count that differs
///   from the expected is refused: "wrong number of tensors"); transformers' config classes; llama2.c run.c.
ModelFile LoadModelFile(const std::string& path, const LoadOptions& options = {});

/// The same for an already parsed GGUF file (e.g. bytes in memory).
ModelFile LoadGgufModel(const GgufFile& gguf, const LoadOptions& options = {});

/// The same for an opened Hugging Face checkpoint folder.
ModelFile LoadHfModel(const HfCheckpoint& checkpoint, const LoadOptions& options = {});

/// The same for the bytes of a llama2.c checkpoint (validated by ParseCheckpointHeader).
ModelFile LoadLlama2cModel(std::shared_ptr<const MappedFile> file);

}  // namespace posenc
