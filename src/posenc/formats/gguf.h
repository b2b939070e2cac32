// GGUF reader (llama.cpp's model format, versions 2 and 3): bytes in, validated metadata and tensor infos out.
//
// File layout (ggml docs/gguf.md): magic "GGUF", u32 version, u64 tensor_count, u64 metadata_kv_count, the
// metadata key/value pairs, the tensor infos, padding to `general.alignment` (default 32), then the tensor data
// section. Every count, length and offset is checked against the bytes that remain before it is used, with
// overflow-safe arithmetic; nothing outside the file is ever read.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/kernels/ggml_types.h"
#include "posenc/formats/mapped_file.h"

namespace posenc {

/// Types of GGUF metadata values, numbered as the spec's `gguf_metadata_value_type`.
enum class GgufType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

/// The spec's name of a value type ("uint32", "float32", "string", "array", ...); "type N" for unknown ids.
std::string GgufTypeName(GgufType type);

/// True for the eight integer types (any width, any sign).
bool IsIntegerType(GgufType type);

/// Default alignment of tensor data when `general.alignment` is absent (bytes).
inline constexpr uint32_t kGgufDefaultAlignment = 32;
/// Deepest nesting of arrays accepted in metadata (an array of scalars is depth 1). Reading is iterative; the
/// limit bounds memory and the work of later consumers.
inline constexpr int kGgufMaxArrayDepth = 8;
/// Longest tensor name the spec allows (bytes).
inline constexpr uint64_t kGgufMaxTensorName = 64;
/// Longest metadata key the spec allows (bytes).
inline constexpr uint64_t kGgufMaxKeyLength = 65535;

/// One tensor info, validated: its bytes lie inside the data section, at an aligned offset, and do not overlap
/// another tensor's.
struct GgufTensorInfo {
  std::string_view name;          // view into the file (valid while the GgufFile lives)
  GgmlType type = GgmlType::kF32;
  int n_dims = 0;                 // 1..4
  std::array<int64_t, 4> ne{};    // ggml order: ne[0] = values per row (innermost), ne[1] = rows, ...; unused = 1
  int64_t n_elements = 0;         // product of ne, > 0
  uint64_t offset = 0;            // from the start of the data section, a multiple of the alignment
  uint64_t n_bytes = 0;           // n_elements / block_size * type_size
  const uint8_t* data = nullptr;  // first byte, inside the file's mapping

  /// Row-major shape, outermost first: {ne[n_dims-1], ..., ne[0]} (a ggml [ne0=dim, ne1=vocab] matrix is
  /// {vocab, dim}).
  std::vector<int64_t> Shape() const;
  /// Values per row (ne[0]) and number of rows (n_elements / ne[0]).
  int64_t row_length() const { return ne[0]; }
  int64_t n_rows() const { return n_elements / ne[0]; }
};

namespace gguf_detail {
struct FileData;  // the parsed file (gguf.cc)
}  // namespace gguf_detail

/// A view of one metadata array (possibly an element of a nested array). Cheap to copy; valid while the
/// GgufFile it came from lives. Numeric elements stay in the file (little-endian, unaligned) and are read on
/// access; string elements are string_views into the file built in one pass at load.
///
/// Errors: ConfigError naming the file, the key, the element index and the expected/actual type when an
/// accessor does not match the element type, or an integer does not fit the requested type; RangeError for an
/// index >= size().
class GgufArray {
 public:
  GgufType element_type() const;
  size_t size() const;

  /// Element i of an integer array (any width and sign).
  int64_t Int64At(size_t i) const;
  /// Element i of a float32 or float64 array.
  double FloatAt(size_t i) const;
  /// Element i of a bool array.
  bool BoolAt(size_t i) const;
  /// Element i of a string array (view into the file).
  std::string_view StringAt(size_t i) const;
  /// Element i of an array of arrays.
  GgufArray ArrayAt(size_t i) const;

  /// Every element of a string array, as views into the file (no copy; one vector built at load).
  std::span<const std::string_view> Strings() const;
  /// Every element of a float32 array (exact) or float64 array (rounded to nearest float32), one allocation.
  std::vector<float> ToFloat32() const;
  /// Every element of an integer array, each checked to fit in int32.
  std::vector<int32_t> ToInt32() const;
  /// Every element of an integer array, each checked to fit in int64 (uint64 values > 2^63-1 are errors).
  std::vector<int64_t> ToInt64() const;
  /// The raw little-endian element bytes of a numeric or bool array (size() * element size bytes).
  std::span<const uint8_t> RawBytes() const;

 private:
  friend class GgufFile;
  GgufArray(const gguf_detail::FileData* data, uint32_t node, std::string_view key)
      : data_(data), node_(node), key_(key) {}
  const gguf_detail::FileData* data_ = nullptr;
  uint32_t node_ = 0;     // index of the array's value node
  std::string_view key_;  // the top-level key it belongs to (for error messages)
};

/// A parsed, validated GGUF file. Movable; metadata views, arrays and tensor data pointers stay valid while it
/// lives (they point into its mapping).
///
/// Errors of the getters: ConfigError naming the file, the key and the expected and actual type when a key is
/// missing (Get*), holds another type, or holds an integer that does not fit the requested type.
class GgufFile {
 public:
  /// Maps and parses a file. Errors: as MappedFile::Open and Parse.
  static GgufFile Open(const std::string& path);

  /// Parses bytes (a mapped file or bytes in memory: fuzzing, tests).
  ///
  /// Errors: IoError naming the file and the field/key/tensor and the value, for: wrong magic; version other
  ///   than 2 or 3 (1 is obsolete; a byte-swapped version means a big-endian file); truncation anywhere
  ///   (header, a key, a value, an array, a tensor info, the data section); string or array lengths past the
  ///   end of the file; counts that the remaining bytes cannot hold; an empty or over-long key or tensor name;
  ///   an unknown value type; a bool byte other than 0 or 1; arrays nested deeper than kGgufMaxArrayDepth;
  ///   duplicate keys or tensor names; general.alignment not an integer power of two; n_dims outside [1, 4];
  ///   a dimension < 1 or >= 2^63; an element count or byte size that overflows int64; an unknown ggml type id;
  ///   a row (ne[0]) that is not a whole number of blocks; a tensor offset not a multiple of the alignment,
  ///   outside the data section, or overlapping another tensor.
  /// Source: ggml docs/gguf.md (v3); checks as llama.cpp gguf.cpp `gguf_init_from_file_impl`, plus overlap and
  ///   nesting checks it lacks.
  static GgufFile Parse(std::shared_ptr<const MappedFile> file);

  GgufFile(GgufFile&&) noexcept;
  GgufFile& operator=(GgufFile&&) noexcept;
  ~GgufFile();

  const std::string& path() const;
  uint32_t version() const;
  /// general.alignment, or 32.
  uint32_t alignment() const;
  /// Absolute offset of the tensor data section in the file.
  uint64_t data_offset() const;
  /// The bytes the views point into (keep it to keep tensor data alive).
  const std::shared_ptr<const MappedFile>& file() const;

  // ---- metadata ----
  /// Keys in file order (views into the file).
  const std::vector<std::string_view>& keys() const;
  bool Has(std::string_view key) const;
  /// Type of a key's value. Errors: ConfigError if the key is missing.
  GgufType TypeOf(std::string_view key) const;

  /// An integer value of any width and sign (u8..u64, i8..i64), checked to fit in int64.
  int64_t GetInt64(std::string_view key) const;
  /// An integer value of any width and sign, checked to be >= 0.
  uint64_t GetUInt64(std::string_view key) const;
  /// A float32 or float64 value (float32 widened exactly).
  double GetFloat(std::string_view key) const;
  bool GetBool(std::string_view key) const;
  /// A string value (view into the file; not checked for UTF-8).
  std::string_view GetString(std::string_view key) const;
  GgufArray GetArray(std::string_view key) const;

  /// As the Get* functions, but std::nullopt when the key is absent (a present key of another type is still
  /// an error).
  std::optional<int64_t> FindInt64(std::string_view key) const;
  std::optional<double> FindFloat(std::string_view key) const;
  std::optional<bool> FindBool(std::string_view key) const;
  std::optional<std::string_view> FindString(std::string_view key) const;
  std::optional<GgufArray> FindArray(std::string_view key) const;

  // ---- tensors ----
  /// Tensor infos in file order.
  const std::vector<GgufTensorInfo>& tensors() const;
  /// The tensor of that name, or nullptr.
  const GgufTensorInfo* FindTensor(std::string_view name) const;
  /// The tensor of that name. Errors: ConfigError naming the file and the tensor if absent.
  const GgufTensorInfo& GetTensor(std::string_view name) const;

 private:
  explicit GgufFile(std::unique_ptr<gguf_detail::FileData> data);
  std::unique_ptr<gguf_detail::FileData> data_;
};

}  // namespace posenc
