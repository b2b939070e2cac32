// What one architecture file provides (model/arch/<name>.cc), and the key readers it reads a file's
// hyperparameters through. An architecture file is the one place that knows a family's GGUF and Hugging Face
// keys, its tensor names and pair layout, and how its layers' positional specs are built
// (cf. llama.cpp src/models/*.cpp and the per-architecture cases of llama-model.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/formats/gguf.h"
#include "posenc/model/config.h"
#include "posenc/model/tensors.h"

namespace posenc {

/// Notes a reader leaves for the load message and `inspect --model`: defaults applied for absent keys, and
/// details the file states that this format cannot express.
struct LoadNotes {
  std::vector<std::string> notes;
  void Add(std::string note) { notes.push_back(std::move(note)); }
};

/// The `{arch}.*` keys of a GGUF file, read with range checks and remembered, so that positional keys the
/// architecture does not apply can be refused (UnreadPositionalKeys).
class GgufKeys {
 public:
  GgufKeys(const GgufFile& file, std::string arch);

  const GgufFile& file() const { return file_; }
  const std::string& arch() const { return arch_; }
  const std::string& source() const { return file_.path(); }
  /// "{arch}.{key}".
  std::string Key(std::string_view key) const;
  bool Has(std::string_view key) const;

  /// An integer key in [1, 2^31]. Errors: ConfigError naming the file and the key if absent, of another type
  /// or out of range.
  int64_t Size(std::string_view key);
  std::optional<int64_t> OptSize(std::string_view key);
  /// The number of layers (a Size) bounded by the file's tensor count: every layer holds tensors of its own, so
  /// a larger count is a corrupt header, refused before any per-layer allocation. Errors: ConfigError naming the
  /// key, its value and the tensor count.
  int64_t LayerCount(std::string_view key);
  /// An integer key in [0, 2^31] (0 allowed: e.g. a sliding window of 0 means none).
  std::optional<int64_t> OptCount(std::string_view key);
  /// A float key that must be finite (and > 0 unless `allow_zero`). Errors: ConfigError naming key and value.
  double Float(std::string_view key);
  std::optional<double> OptFloat(std::string_view key, bool allow_zero = false, bool allow_negative = false);
  std::optional<bool> OptBool(std::string_view key);
  std::optional<std::string> OptString(std::string_view key);
  /// An array of integers or booleans (llama.cpp's get_key_or_arr), or a single integer repeated n times.
  std::optional<std::vector<int64_t>> OptIntsOrArray(std::string_view key, int64_t n);
  /// Marks a key as read without using its value (e.g. a key whose meaning is recorded elsewhere).
  void MarkRead(std::string_view key);

  /// Keys under "{arch}.rope.", "{arch}.attention.sliding_window", "{arch}.attention.scale",
  /// "{arch}.attn_logit_softcapping", "{arch}.final_logit_softcapping" that nobody read.
  std::vector<std::string> UnreadPositionalKeys() const;

 private:
  const GgufFile& file_;
  std::string arch_;
  std::set<std::string> read_;
};

/// The keys of a Hugging Face config.json, read with type checks and remembered.
class HfKeys {
 public:
  /// `n_tensors`: the checkpoint's tensor count, which bounds LayerCount.
  HfKeys(const nlohmann::json& config, std::string source, int64_t n_tensors);

  const nlohmann::json& config() const { return config_; }
  const std::string& source() const { return source_; }
  /// The value of a key, or nullptr when absent or null (as transformers treats null). Marks it read.
  const nlohmann::json* Get(std::string_view key);
  bool Has(std::string_view key) const;
  /// A required integer in [1, 2^31]. Errors: ConfigError naming the file, the key and the value.
  int64_t Size(std::string_view key);
  std::optional<int64_t> OptSize(std::string_view key);
  /// The number of layers (a Size) bounded by the checkpoint's tensor count, as GgufKeys::LayerCount.
  int64_t LayerCount(std::string_view key);
  /// An integer in [0, 2^31] when present (a count that may be 0, e.g. max_window_layers).
  std::optional<int64_t> OptCount(std::string_view key);
  std::optional<double> OptFloat(std::string_view key);
  bool Bool(std::string_view key, bool fallback);
  std::optional<std::string> OptString(std::string_view key);
  void MarkRead(std::string_view key);

  /// Positional keys (rope_*, sliding_window*, layer_types, max_window_layers, no_rope_*, partial_rotary_factor,
  /// rotary_*, position_embedding_type, dual_chunk_attention_config, attention_chunk_size, use_mrope, ...)
  /// present with a non-null value that nobody read: the architecture would ignore them.
  std::vector<std::string> UnreadPositionalKeys() const;

 private:
  const nlohmann::json& config_;
  std::string source_;
  int64_t n_tensors_;
  std::set<std::string> read_;
};

/// One architecture: its names in each format and how a file of it becomes a ModelConfig and ModelTensors.
/// from_gguf / from_hf fill every field of the config (layers included) and every tensor the config needs;
/// the loader then validates the config, checks every tensor's shape against it and refuses unused tensors.
struct Architecture {
  std::string_view name;                         // "gemma3": ModelConfig::architecture
  std::vector<std::string_view> gguf_names;      // general.architecture values
  std::vector<std::string_view> hf_classes;      // config.json architectures[0]
  std::vector<std::string_view> hf_model_types;  // config.json model_type (used without architectures)
  void (*from_gguf)(GgufKeys& keys, TensorSource& tensors, ModelConfig& config, ModelTensors& out,
                    LoadNotes& notes) = nullptr;
  void (*from_hf)(HfKeys& keys, TensorSource& tensors, ModelConfig& config, ModelTensors& out,
                  LoadNotes& notes) = nullptr;
};

/// Every architecture posenc reads (model/arch/registry.cc).
const std::vector<const Architecture*>& Architectures();

/// The architecture of a GGUF general.architecture / HF class or model_type, or nullptr.
const Architecture* FindGgufArchitecture(std::string_view name);
const Architecture* FindHfArchitecture(std::string_view hf_class, std::string_view model_type);

/// Families that are out of scope (mixture-of-experts, vision towers, state-space layers): a sentence saying
/// what the family is, or nullopt. Used to make the refusal say why.
std::optional<std::string> OutOfScopeFamily(std::string_view name);

}  // namespace posenc
