// safetensors reader (Hugging Face): bytes in, validated tensor table out; and the Hugging Face checkpoint
// folder around it (config.json + model.safetensors, or shards named by model.safetensors.index.json).
//
// File layout (huggingface/safetensors README): u64 little-endian N, N bytes of UTF-8 JSON header
// {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...},
// then the data buffer; offsets are relative to the buffer's start (byte 8 + N).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/kernels/ggml_types.h"
#include "posenc/formats/mapped_file.h"

namespace posenc {

/// Largest safetensors header accepted (bytes), as the reference implementation's limit.
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

/// One validated tensor of a safetensors file.
struct SafetensorsTensor {
  std::string name;
  std::string dtype;              // as written: "F32", "F16" or "BF16"
  GgmlType type = GgmlType::kF32; // the same encoding as a ggml type (f32, f16, bf16)
  std::vector<int64_t> shape;     // row-major, outermost first (as PyTorch)
  int64_t n_elements = 0;
  uint64_t begin = 0;             // data_offsets, relative to the data buffer
  uint64_t end = 0;
  const uint8_t* data = nullptr;  // first byte, inside the mapping
  uint64_t n_bytes() const { return end - begin; }
};

/// A parsed, validated safetensors file; tensor data pointers stay valid while it (or `file()`) lives.
class SafetensorsFile {
 public:
  /// Maps and parses a file. Errors: as MappedFile::Open and Parse.
  static SafetensorsFile Open(const std::string& path);

  /// Parses bytes (a mapped file, or bytes in memory for fuzzing and tests).
  ///
  /// Errors: IoError naming the file and the tensor/field and the value, for: fewer than 8 bytes; a header
  ///   length past the end of the file or above kSafetensorsMaxHeader; invalid JSON, duplicate keys, nesting
  ///   deeper than kMaxJsonDepth; a header that is not an object; __metadata__ not an object of strings; an
  ///   entry without dtype/shape/data_offsets or with values of the wrong JSON type; negative or non-integer
  ///   dims or offsets; an unknown dtype, or a known one other than F32/F16/BF16; shape x dtype size not equal
  ///   to end - begin (overflow-checked); begin > end; end past the data buffer; overlapping tensors.
  /// Source: huggingface/safetensors (safetensors/src/tensor.rs `Metadata::validate`), plus the overlap check
  ///   and depth bound.
  static SafetensorsFile Parse(std::shared_ptr<const MappedFile> file);

  const std::string& path() const { return file_->path(); }
  const std::shared_ptr<const MappedFile>& file() const { return file_; }
  /// The header's __metadata__ (empty if absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Tensors sorted by begin offset.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// The tensor of that name, or nullptr.
  const SafetensorsTensor* FindTensor(std::string_view name) const;

 private:
  std::shared_ptr<const MappedFile> file_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

/// A Hugging Face checkpoint folder: config.json and its safetensors weights.
struct HfCheckpoint {
  std::string dir;
  std::string config_path;
  nlohmann::json config;                  // config.json, strictly parsed (a JSON object)
  std::vector<SafetensorsFile> shards;    // model.safetensors alone, or the shards of the index (sorted by name)
  std::vector<std::string> shard_names;   // file names, parallel to shards

  /// The tensor of that name (from the shard the index names), or nullptr.
  const SafetensorsTensor* FindTensor(std::string_view name) const;
  /// Every tensor name of the checkpoint.
  std::vector<std::string> TensorNames() const;

  // name -> (shard, index in that shard's tensors())
  std::unordered_map<std::string, std::pair<size_t, size_t>> index;
};

/// Opens a Hugging Face checkpoint folder. `model.safetensors` is used when present (as transformers does),
/// else `model.safetensors.index.json`, whose "weight_map" names each tensor's shard.
///
/// Errors: IoError naming the path and the field/tensor for: a path that is not a directory; config.json
///   missing, not a regular file, invalid JSON or not an object; neither weights file present; an index without
///   a "weight_map" object of strings; a shard name that is not a plain file name (no '/', not "." or "..") or
///   that does not exist; a tensor the weight_map names that its shard does not hold; plus every
///   SafetensorsFile::Parse error of each shard. Tensors a shard holds but the weight_map does not name are
///   ignored, as transformers ignores them.
HfCheckpoint OpenHfCheckpoint(const std::string& dir);

}  // namespace posenc
