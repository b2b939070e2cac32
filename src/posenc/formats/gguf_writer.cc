#include "posenc/formats/gguf_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "posenc/io/output_file.h"

namespace posenc {
namespace {

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

uint64_t PadTo(uint64_t n, uint64_t a) { return (n + a - 1) / a * a; }

void CheckTensorName(const std::string& name) {
  if (name.empty() || name.size() > kGgufMaxTensorName) {
    throw ConfigError(fmt::format("GGUF tensor name must be 1..{} bytes, got '{}' ({} bytes)", kGgufMaxTensorName,
                                  name, name.size()));
  }
}

}  // namespace

// ---- GgufWriteValue ----------------------------------------------------------------------------------------------

GgufWriteValue GgufWriteValue::Scalar(GgufType type, const void* bytes, size_t size) {
  GgufWriteValue v;
  v.type_ = type;
  v.bytes_.assign(static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
  return v;
}

GgufWriteValue GgufWriteValue::UInt8(uint8_t v) { return Scalar(GgufType::kUint8, &v, 1); }
GgufWriteValue GgufWriteValue::Int8(int8_t v) { return Scalar(GgufType::kInt8, &v, 1); }
GgufWriteValue GgufWriteValue::UInt16(uint16_t v) { return Scalar(GgufType::kUint16, &v, 2); }
GgufWriteValue GgufWriteValue::Int16(int16_t v) { return Scalar(GgufType::kInt16, &v, 2); }
GgufWriteValue GgufWriteValue::UInt32(uint32_t v) { return Scalar(GgufType::kUint32, &v, 4); }
GgufWriteValue GgufWriteValue::Int32(int32_t v) { return Scalar(GgufType::kInt32, &v, 4); }
GgufWriteValue GgufWriteValue::UInt64(uint64_t v) { return Scalar(GgufType::kUint64, &v, 8); }
GgufWriteValue GgufWriteValue::Int64(int64_t v) { return Scalar(GgufType::kInt64, &v, 8); }
GgufWriteValue GgufWriteValue::Float32(float v) { return Scalar(GgufType::kFloat32, &v, 4); }
GgufWriteValue GgufWriteValue::Float64(double v) { return Scalar(GgufType::kFloat64, &v, 8); }
GgufWriteValue GgufWriteValue::Bool(bool v) {
  const uint8_t b = v ? 1 : 0;
  return Scalar(GgufType::kBool, &b, 1);
}
GgufWriteValue GgufWriteValue::String(std::string v) {
  GgufWriteValue out;
  out.type_ = GgufType::kString;
  out.string_ = std::move(v);
  return out;
}

GgufWriteValue GgufWriteValue::Array(GgufType element_type, std::vector<GgufWriteValue> elements) {
  GgufWriteValue out;
  out.type_ = GgufType::kArray;
  out.element_type_ = element_type;
  out.count_ = elements.size();
  out.depth_ = 1;
  for (size_t i = 0; i < elements.size(); ++i) {
    if (elements[i].type_ != element_type) {
      throw ConfigError(fmt::format("GGUF array of {}: element {} is {}", GgufTypeName(element_type), i,
                                    GgufTypeName(elements[i].type_)));
    }
    out.depth_ = std::max(out.depth_, elements[i].depth_ + 1);
  }
  if (out.depth_ > kGgufMaxArrayDepth) {
    throw ConfigError(fmt::format("GGUF arrays nested {} deep exceed the limit of {}", out.depth_,
                                  kGgufMaxArrayDepth));
  }
  if (element_type == GgufType::kString) {
    for (GgufWriteValue& e : elements) out.strings_.push_back(std::move(e.string_));
  } else if (element_type == GgufType::kArray) {
    out.children_ = std::move(elements);
  } else {
    for (const GgufWriteValue& e : elements) out.bytes_.insert(out.bytes_.end(), e.bytes_.begin(), e.bytes_.end());
  }
  return out;
}

GgufWriteValue GgufWriteValue::StringArray(std::vector<std::string> elements) {
  GgufWriteValue out = Array(GgufType::kString, {});
  out.count_ = elements.size();
  out.strings_ = std::move(elements);
  return out;
}

// An array value of `count` fixed-size elements already encoded little-endian in `bytes`.
GgufWriteValue GgufWriteValue::Packed(GgufType element_type, uint64_t count, const void* bytes, size_t size) {
  GgufWriteValue out = Array(element_type, {});
  out.count_ = count;
  out.bytes_.assign(static_cast<const uint8_t*>(bytes), static_cast<const uint8_t*>(bytes) + size);
  return out;
}

GgufWriteValue GgufWriteValue::Float32Array(std::span<const float> elements) {
  return Packed(GgufType::kFloat32, elements.size(), elements.data(), elements.size_bytes());
}

GgufWriteValue GgufWriteValue::Int32Array(std::span<const int32_t> elements) {
  return Packed(GgufType::kInt32, elements.size(), elements.data(), elements.size_bytes());
}

// Writes the value's payload (not its type): recursion depth is bounded by kGgufMaxArrayDepth (checked above).
void GgufWriteValue::Emit(std::vector<uint8_t>& out) const {
  if (type_ == GgufType::kString) {
    PutString(out, string_);
    return;
  }
  if (type_ != GgufType::kArray) {
    out.insert(out.end(), bytes_.begin(), bytes_.end());
    return;
  }
  Put<uint32_t>(out, static_cast<uint32_t>(element_type_));
  Put<uint64_t>(out, count_);
  if (element_type_ == GgufType::kString) {
    for (const std::string& s : strings_) PutString(out, s);
  } else if (element_type_ == GgufType::kArray) {
    for (const GgufWriteValue& c : children_) c.Emit(out);
  } else {
    out.insert(out.end(), bytes_.begin(), bytes_.end());
  }
}

// ---- GgufWriter --------------------------------------------------------------------------------------------------

GgufWriter::GgufWriter(uint32_t version) : version_(version) {
  if (version != 2 && version != 3) throw ConfigError(fmt::format("GGUF version must be 2 or 3, got {}", version));
}

void GgufWriter::Set(const std::string& key, GgufWriteValue value) {
  if (key.empty() || key.size() > kGgufMaxKeyLength) {
    throw ConfigError(fmt::format("GGUF key must be 1..{} bytes, got {} bytes", kGgufMaxKeyLength, key.size()));
  }
  if (key == "general.alignment") throw ConfigError("set general.alignment with GgufWriter::SetAlignment");
  for (auto& [k, v] : kv_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  kv_.emplace_back(key, std::move(value));
}

namespace {

// An integer value of type t from the low bytes of `bits`.
GgufWriteValue IntegerValue(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kUint8: return GgufWriteValue::UInt8(static_cast<uint8_t>(bits));
    case GgufType::kInt8: return GgufWriteValue::Int8(static_cast<int8_t>(bits));
    case GgufType::kUint16: return GgufWriteValue::UInt16(static_cast<uint16_t>(bits));
    case GgufType::kInt16: return GgufWriteValue::Int16(static_cast<int16_t>(bits));
    case GgufType::kUint32: return GgufWriteValue::UInt32(static_cast<uint32_t>(bits));
    case GgufType::kInt32: return GgufWriteValue::Int32(static_cast<int32_t>(bits));
    case GgufType::kUint64: return GgufWriteValue::UInt64(bits);
    default: return GgufWriteValue::Int64(static_cast<int64_t>(bits));
  }
}

// Converts a reader value (array view) to an owned value; depth is bounded by kGgufMaxArrayDepth.
GgufWriteValue FromArray(const GgufArray& a) {
  const GgufType t = a.element_type();
  std::vector<GgufWriteValue> elements;
  elements.reserve(a.size());
  if (t == GgufType::kString) {
    std::vector<std::string> strings(a.Strings().begin(), a.Strings().end());
    return GgufWriteValue::StringArray(std::move(strings));
  }
  for (size_t i = 0; i < a.size(); ++i) {
    switch (t) {
      case GgufType::kArray: elements.push_back(FromArray(a.ArrayAt(i))); break;
      case GgufType::kFloat32: elements.push_back(GgufWriteValue::Float32(static_cast<float>(a.FloatAt(i)))); break;
      case GgufType::kFloat64: elements.push_back(GgufWriteValue::Float64(a.FloatAt(i))); break;
      case GgufType::kBool: elements.push_back(GgufWriteValue::Bool(a.BoolAt(i))); break;
      default: {  // integers: the raw little-endian bytes of element i, in the same type
        const std::span<const uint8_t> raw = a.RawBytes();
        const size_t size = raw.size() / a.size();
        uint64_t bits = 0;
        std::memcpy(&bits, raw.data() + i * size, size);
        elements.push_back(IntegerValue(t, bits));
      }
    }
  }
  return GgufWriteValue::Array(t, std::move(elements));
}

}  // namespace

void GgufWriter::CopyMetadata(const GgufFile& source) {
  for (std::string_view key : source.keys()) {
    if (key == "general.alignment") continue;
    const GgufType t = source.TypeOf(key);
    const std::string k(key);
    switch (t) {
      case GgufType::kUint8:
      case GgufType::kUint16:
      case GgufType::kUint32:
      case GgufType::kUint64: Set(k, IntegerValue(t, source.GetUInt64(key))); break;
      case GgufType::kInt8:
      case GgufType::kInt16:
      case GgufType::kInt32:
      case GgufType::kInt64: Set(k, IntegerValue(t, static_cast<uint64_t>(source.GetInt64(key)))); break;
      case GgufType::kFloat32: Set(k, GgufWriteValue::Float32(static_cast<float>(source.GetFloat(key)))); break;
      case GgufType::kFloat64: Set(k, GgufWriteValue::Float64(source.GetFloat(key))); break;
      case GgufType::kBool: Set(k, GgufWriteValue::Bool(source.GetBool(key))); break;
      case GgufType::kString: Set(k, GgufWriteValue::String(std::string(source.GetString(key)))); break;
      case GgufType::kArray: Set(k, FromArray(source.GetArray(key))); break;
    }
  }
}

void GgufWriter::SetAlignment(uint32_t alignment) {
  if (alignment < 1 || alignment > (1u << 30) || (alignment & (alignment - 1)) != 0) {
    throw ConfigError(fmt::format("GGUF alignment must be a power of two in [1, 2^30], got {}", alignment));
  }
  alignment_ = alignment;
}

void GgufWriter::AddTensorBytes(const std::string& name, GgmlType type, std::span<const int64_t> shape,
                                std::span<const uint8_t> bytes) {
  CheckTensorName(name);
  for (const Tensor& t : tensors_) {
    if (t.name == name) throw ConfigError(fmt::format("GGUF tensor '{}' added twice", name));
  }
  if (shape.empty() || shape.size() > 4) {
    throw ConfigError(fmt::format("GGUF tensor '{}': 1 to 4 dimensions, got {}", name, shape.size()));
  }
  Tensor t{name, type, std::vector<int64_t>(shape.rbegin(), shape.rend()), {}};
  int64_t rows = 1;
  for (size_t j = 0; j < t.ne.size(); ++j) {
    if (t.ne[j] < 1) throw ConfigError(fmt::format("GGUF tensor '{}': dimension must be >= 1, got {}", name, t.ne[j]));
    if (j > 0) {
      if (rows > std::numeric_limits<int64_t>::max() / t.ne[j]) {
        throw ConfigError(fmt::format("GGUF tensor '{}': element count overflows", name));
      }
      rows *= t.ne[j];
    }
  }
  const int64_t row_bytes = GgmlRowBytes(type, t.ne[0]);
  if (row_bytes < 0) {
    throw ShapeError(fmt::format("GGUF tensor '{}': row of {} values is not a whole number of {} blocks", name,
                                 t.ne[0], GgmlTypeName(type)));
  }
  if (rows > std::numeric_limits<int64_t>::max() / std::max<int64_t>(row_bytes, 1) ||
      static_cast<uint64_t>(rows * row_bytes) != bytes.size()) {
    throw ShapeError(fmt::format("GGUF tensor '{}': {} rows of {} bytes, got {} bytes", name, rows, row_bytes,
                                 bytes.size()));
  }
  t.bytes.assign(bytes.begin(), bytes.end());
  tensors_.push_back(std::move(t));
}

void GgufWriter::AddTensor(const std::string& name, GgmlType type, std::span<const int64_t> shape,
                           std::span<const float> values) {
  int64_t n = 1;
  for (int64_t d : shape) n = d > 0 && n <= std::numeric_limits<int64_t>::max() / d ? n * d : -1;
  if (n < 0 || static_cast<size_t>(n) != values.size()) {
    throw ShapeError(fmt::format("GGUF tensor '{}': {} values do not match the shape", name, values.size()));
  }
  std::vector<uint8_t> bytes;
  if (type == GgmlType::kF32) {
    const auto* p = reinterpret_cast<const uint8_t*>(values.data());
    bytes.assign(p, p + values.size_bytes());
  } else if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    bytes.resize(values.size() * 2);
    for (size_t i = 0; i < values.size(); ++i) {
      const uint16_t h = type == GgmlType::kF16 ? F32ToF16(values[i]) : F32ToBF16(values[i]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  } else {
    throw ConfigError(fmt::format("GGUF tensor '{}': AddTensor stores f32, f16 or bf16, got {}", name,
                                  GgmlTypeName(type)));
  }
  AddTensorBytes(name, type, shape, bytes);
}

void GgufWriter::EmitHeader(std::vector<uint8_t>& out) const {
  Put<uint32_t>(out, 0x46554747u);
  Put<uint32_t>(out, version_);
  Put<uint64_t>(out, tensors_.size());
  const bool write_alignment = alignment_ != kGgufDefaultAlignment;
  Put<uint64_t>(out, kv_.size() + (write_alignment ? 1 : 0));
  if (write_alignment) {
    PutString(out, "general.alignment");
    Put<uint32_t>(out, static_cast<uint32_t>(GgufType::kUint32));
    Put<uint32_t>(out, alignment_);
  }
  for (const auto& [key, value] : kv_) {
    PutString(out, key);
    Put<uint32_t>(out, static_cast<uint32_t>(value.type_));
    value.Emit(out);
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    PutString(out, t.name);
    Put<uint32_t>(out, static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) Put<uint64_t>(out, static_cast<uint64_t>(d));
    Put<uint32_t>(out, static_cast<uint32_t>(t.type));
    Put<uint64_t>(out, offset);
    offset = PadTo(offset + t.bytes.size(), alignment_);
  }
  out.resize(PadTo(out.size(), alignment_), 0);
}

std::vector<uint8_t> GgufWriter::Serialize() const {
  std::vector<uint8_t> out;
  EmitHeader(out);
  for (const Tensor& t : tensors_) {
    out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    out.resize(PadTo(out.size(), alignment_), 0);
  }
  return out;
}

void GgufWriter::WriteFile(const std::string& path, bool overwrite) const {
  struct stat st {};
  if (!overwrite && ::lstat(path.c_str(), &st) == 0) {
    throw IoError(fmt::format("cannot write '{}': the file exists (refusing to overwrite it)", path));
  }
  std::string tmp;
  const int fd = CreateTempBeside(path, "cannot write", tmp);
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot write '{}': {}: {}", path, what, reason));
  };
  auto write_all = [&](const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t w = ::write(fd, p, n);
      if (w < 0) {
        if (errno == EINTR) continue;
        fail("write");
      }
      p += w;
      n -= static_cast<size_t>(w);
    }
  };
  std::vector<uint8_t> header;
  EmitHeader(header);
  write_all(header.data(), header.size());
  uint64_t written = header.size();
  const std::vector<uint8_t> zeros(alignment_, 0);
  for (const Tensor& t : tensors_) {
    write_all(t.bytes.data(), t.bytes.size());
    written += t.bytes.size();
    const uint64_t pad = PadTo(written, alignment_) - written;
    write_all(zeros.data(), static_cast<size_t>(pad));
    written += pad;
  }
  if (::fchmod(fd, 0644) != 0) fail("chmod");
  if (::fsync(fd) != 0) fail("fsync");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw IoError(fmt::format("cannot write '{}': close: {}", path, reason));
  }
  const int rc = overwrite ? ::rename(tmp.c_str(), path.c_str()) : ::link(tmp.c_str(), path.c_str());
  const int saved = errno;
  if (!overwrite || rc != 0) ::unlink(tmp.c_str());
  if (rc != 0) {
    throw IoError(fmt::format("cannot write '{}': {}{}", path, std::strerror(saved),
                              saved == EEXIST ? " (the file exists; refusing to overwrite it)" : ""));
  }
}

}  // namespace posenc
