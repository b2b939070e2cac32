// GGUF writer: metadata of every value type, tensors, alignment; written atomically.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "posenc/kernels/ggml_types.h"
#include "posenc/formats/gguf.h"

namespace posenc {

/// One metadata value to write (owned). Build it with the named constructors.
class GgufWriteValue {
 public:
  static GgufWriteValue UInt8(uint8_t v);
  static GgufWriteValue Int8(int8_t v);
  static GgufWriteValue UInt16(uint16_t v);
  static GgufWriteValue Int16(int16_t v);
  static GgufWriteValue UInt32(uint32_t v);
  static GgufWriteValue Int32(int32_t v);
  static GgufWriteValue UInt64(uint64_t v);
  static GgufWriteValue Int64(int64_t v);
  static GgufWriteValue Float32(float v);
  static GgufWriteValue Float64(double v);
  static GgufWriteValue Bool(bool v);
  static GgufWriteValue String(std::string v);
  /// An array whose elements all have type `element_type` (checked). Arrays of arrays may nest up to
  /// kGgufMaxArrayDepth. Errors: ConfigError if an element's type differs or the nesting is too deep.
  static GgufWriteValue Array(GgufType element_type, std::vector<GgufWriteValue> elements);
  /// Packed arrays (one allocation for the elements).
  static GgufWriteValue StringArray(std::vector<std::string> elements);
  static GgufWriteValue Float32Array(std::span<const float> elements);
  static GgufWriteValue Int32Array(std::span<const int32_t> elements);

  GgufType type() const { return type_; }
  /// Array nesting depth: 0 for a scalar, 1 for an array of scalars, ...
  int depth() const { return depth_; }

 private:
  friend class GgufWriter;
  static GgufWriteValue Scalar(GgufType type, const void* bytes, size_t size);
  static GgufWriteValue Packed(GgufType element_type, uint64_t count, const void* bytes, size_t size);
  void Emit(std::vector<uint8_t>& out) const;

  GgufType type_ = GgufType::kUint8;
  GgufType element_type_ = GgufType::kUint8;  // arrays
  uint64_t count_ = 0;                         // arrays
  int depth_ = 0;
  std::vector<uint8_t> bytes_;                // scalar payload, or packed numeric array elements
  std::string string_;                        // string scalar
  std::vector<std::string> strings_;          // string array
  std::vector<GgufWriteValue> children_;      // array of arrays
};

/// Builds a GGUF file in memory and writes it. Keys keep the order of their first Set; setting a key again
/// replaces its value. Tensor data are copied in at AddTensor* time and written in the order added, each at an
/// offset that is a multiple of the alignment.
class GgufWriter {
 public:
  /// version: 2 or 3 (the layout is the same; 3 is current). Errors: ConfigError for another version.
  explicit GgufWriter(uint32_t version = 3);

  /// Sets a metadata value. Errors: ConfigError if the key is empty or longer than kGgufMaxKeyLength, or if it
  /// is "general.alignment" (use SetAlignment).
  void Set(const std::string& key, GgufWriteValue value);

  /// Copies every metadata key of `source` (except general.alignment) with its exact type, in file order;
  /// keys already set are replaced. For writing a fine-tuned checkpoint with the original's metadata.
  void CopyMetadata(const GgufFile& source);

  /// Tensor data alignment in bytes (a power of two in [1, 2^30]); a value other than 32 also writes
  /// general.alignment (uint32). Errors: ConfigError otherwise.
  void SetAlignment(uint32_t alignment);

  /// Adds a tensor of shape `shape` (row-major, outermost first, 1-4 dims, each >= 1) from float32 values,
  /// stored as `type` (F32, F16 or BF16; F16/BF16 rounded to nearest even).
  /// Errors: ConfigError for a duplicate or invalid name (empty, > 64 bytes), another type, or a bad shape;
  /// ShapeError if values.size() is not the product of shape.
  void AddTensor(const std::string& name, GgmlType type, std::span<const int64_t> shape, std::span<const float> values);

  /// Adds a tensor from its encoded bytes (any ggml type, e.g. hand-built quantized blocks).
  /// Errors: as AddTensor; ShapeError if shape[last] is not a whole number of blocks or bytes.size() differs
  /// from the encoded size.
  void AddTensorBytes(const std::string& name, GgmlType type, std::span<const int64_t> shape,
                      std::span<const uint8_t> bytes);

  /// The whole file as bytes.
  std::vector<uint8_t> Serialize() const;

  /// Writes the file atomically: a temporary file in the same folder, fsync, then a rename (overwrite) or a
  /// hard link that fails if `path` exists (no overwrite). A reader of the old file (mmap) keeps its bytes.
  /// Errors: IoError naming the path if `path` exists and overwrite is false, or on any write error (the
  /// temporary file is removed).
  void WriteFile(const std::string& path, bool overwrite = false) const;

 private:
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;  // ggml order
    std::vector<uint8_t> bytes;
  };
  void EmitHeader(std::vector<uint8_t>& out) const;

  uint32_t version_;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufWriteValue>> kv_;
  std::vector<Tensor> tensors_;
};

}  // namespace posenc
