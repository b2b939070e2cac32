#include "posenc/formats/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

static_assert(std::endian::native == std::endian::little, "GGUF readers assume a little-endian host");

namespace gguf_detail {

// One metadata value. Scalars: `offset` = file offset of the payload (strings: of the bytes, `aux` = length).
// Arrays: `elem_type`, `count`; numeric/bool elements start at `offset`; string elements are
// strings[aux .. aux+count); array elements are nodes[aux .. aux+count).
struct Node {
  GgufType type = GgufType::kUint8;
  GgufType elem_type = GgufType::kUint8;
  uint64_t count = 0;
  uint64_t offset = 0;
  uint64_t aux = 0;
};

struct FileData {
  std::shared_ptr<const MappedFile> file;
  uint32_t version = 0;
  uint32_t alignment = kGgufDefaultAlignment;
  uint64_t data_offset = 0;
  std::vector<Node> nodes;
  std::vector<std::string_view> keys;  // file order
  std::vector<uint32_t> key_nodes;     // keys[i] -> nodes[key_nodes[i]]
  std::unordered_map<std::string_view, uint32_t> key_index;
  std::vector<std::string_view> strings;  // elements of string arrays
  std::vector<GgufTensorInfo> tensors;
  std::unordered_map<std::string_view, size_t> tensor_index;

  const std::string& path() const { return file->path(); }
  const uint8_t* at(uint64_t offset) const { return file->data() + offset; }
};

}  // namespace gguf_detail

using gguf_detail::FileData;
using gguf_detail::Node;

namespace {

constexpr uint64_t kMaxU64 = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kMaxI64 = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());

// Size in bytes of a fixed-size value type; 0 for string and array.
uint64_t FixedSize(GgufType t) {
  switch (t) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kBool: return 1;
    case GgufType::kUint16:
    case GgufType::kInt16: return 2;
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kFloat32: return 4;
    case GgufType::kUint64:
    case GgufType::kInt64:
    case GgufType::kFloat64: return 8;
    case GgufType::kString:
    case GgufType::kArray: return 0;
  }
  return 0;
}

bool IsKnownType(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::kFloat64); }

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// Integer at p of integer type t, as a sign flag + magnitude-preserving pair: returns false if t is not an
// integer type. `negative` values are in `s`, others in `u`.
struct IntValue {
  bool negative = false;
  int64_t s = 0;   // valid when negative
  uint64_t u = 0;  // valid when !negative
};

bool LoadInteger(const uint8_t* p, GgufType t, IntValue* out) {
  int64_t s = 0;
  switch (t) {
    case GgufType::kUint8: out->u = Load<uint8_t>(p); return true;
    case GgufType::kUint16: out->u = Load<uint16_t>(p); return true;
    case GgufType::kUint32: out->u = Load<uint32_t>(p); return true;
    case GgufType::kUint64: out->u = Load<uint64_t>(p); return true;
    case GgufType::kInt8: s = Load<int8_t>(p); break;
    case GgufType::kInt16: s = Load<int16_t>(p); break;
    case GgufType::kInt32: s = Load<int32_t>(p); break;
    case GgufType::kInt64: s = Load<int64_t>(p); break;
    default: return false;
  }
  if (s < 0) {
    out->negative = true;
    out->s = s;
  } else {
    out->u = static_cast<uint64_t>(s);
  }
  return true;
}

std::string IntText(const IntValue& v) { return v.negative ? std::to_string(v.s) : std::to_string(v.u); }

// Bounds-checked sequential reader over the file bytes. Every read names what it was reading when it fails.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path) : data_(data), size_(size), path_(path) {}

  uint64_t pos() const { return pos_; }
  uint64_t remaining() const { return size_ - pos_; }
  // What is being read, for messages ("key 'general.name'", "tensor info 3 'output.weight'").
  void set_item(std::string item) { item_ = std::move(item); }
  const std::string& item() const { return item_; }

  [[noreturn]] void Fail(const std::string& what) const {
    throw IoError(fmt::format("{}: {}{}{}", path_, item_, item_.empty() ? "" : ": ", what));
  }

  void Need(uint64_t n, const char* what) const {
    if (n > remaining()) {
      Fail(fmt::format("truncated: {} needs {} bytes at offset {}, but only {} remain", what, n, pos_,
                       remaining()));
    }
  }
  template <typename T>
  T Read(const char* what) {
    Need(sizeof(T), what);
    const T v = Load<T>(data_ + pos_);
    pos_ += sizeof(T);
    return v;
  }
  void Skip(uint64_t n, const char* what) {
    Need(n, what);
    pos_ += n;
  }
  std::string_view ReadString(const char* what) {
    const uint64_t len = Read<uint64_t>(what);
    if (len > remaining()) {
      Fail(fmt::format("{} length {} runs past the end of the file ({} bytes remain at offset {})", what, len,
                       remaining(), pos_));
    }
    std::string_view s(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += len;
    return s;
  }

 private:
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
  std::string item_;
};

class Parser {
 public:
  Parser(FileData& d, Cursor& c) : d_(d), c_(c) {}

  // Reads the value of type `t` at the cursor into nodes[node].
  void ParseValue(uint32_t node, GgufType t) {
    d_.nodes[node].type = t;
    if (t == GgufType::kArray) {
      ParseArray(node);
      return;
    }
    ParseScalar(node, t);
  }

 private:
  void ParseScalar(uint32_t node, GgufType t) {
    if (t == GgufType::kString) {
      const std::string_view s = c_.ReadString("string value");
      d_.nodes[node].offset = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(s.data()) - d_.at(0));
      d_.nodes[node].aux = s.size();
      return;
    }
    const uint64_t size = FixedSize(t);
    c_.Need(size, "value");
    d_.nodes[node].offset = c_.pos();
    if (t == GgufType::kBool) CheckBools(c_.pos(), 1);
    c_.Skip(size, "value");
  }

  void CheckBools(uint64_t offset, uint64_t count) {
    const uint8_t* p = d_.at(offset);
    for (uint64_t i = 0; i < count; ++i) {
      if (p[i] > 1) {
        c_.Fail(fmt::format("bool {}at offset {} must be 0 or 1, got {}",
                            count > 1 ? fmt::format("element {} ", i) : "", offset + i, p[i]));
      }
    }
  }

  // Reads the element type and count of the array whose node is `node`, then its elements: scalars and strings
  // in place; arrays of arrays get `count` child nodes and a frame on the explicit stack (no recursion).
  struct Frame {
    uint64_t first;  // index of the first child node
    uint64_t count;
    uint64_t next;
    int depth;       // nesting depth of the children
  };

  void BeginArray(uint32_t node, int depth, std::vector<Frame>& stack) {
    const uint32_t type_id = c_.Read<uint32_t>("array element type");
    if (!IsKnownType(type_id)) c_.Fail(fmt::format("array element type {} is not a GGUF value type", type_id));
    const auto elem = static_cast<GgufType>(type_id);
    const uint64_t count = c_.Read<uint64_t>("array length");
    Node& n = d_.nodes[node];
    n.elem_type = elem;
    n.count = count;
    const uint64_t min_size = elem == GgufType::kString ? 8 : elem == GgufType::kArray ? 12 : FixedSize(elem);
    if (count > c_.remaining() / min_size) {
      c_.Fail(fmt::format("truncated or corrupt: array of {} {} elements needs at least {} bytes per element, but "
                          "only {} bytes remain at offset {}",
                          count, GgufTypeName(elem), min_size, c_.remaining(), c_.pos()));
    }
    if (elem == GgufType::kString) {
      n.aux = d_.strings.size();
      d_.strings.reserve(d_.strings.size() + static_cast<size_t>(count));
      for (uint64_t i = 0; i < count; ++i) d_.strings.push_back(c_.ReadString("array string"));
    } else if (elem == GgufType::kArray) {
      if (depth + 1 > kGgufMaxArrayDepth) {
        c_.Fail(fmt::format("arrays nested {} deep exceed the limit of {}", depth + 1, kGgufMaxArrayDepth));
      }
      const uint64_t first = d_.nodes.size();
      if (first + count > std::numeric_limits<uint32_t>::max()) c_.Fail("too many nested array values");
      n.aux = first;
      d_.nodes.resize(static_cast<size_t>(first + count));
      stack.push_back({first, count, 0, depth + 1});
    } else {
      n.offset = c_.pos();
      const uint64_t bytes = count * min_size;  // cannot overflow: count <= remaining / min_size
      if (elem == GgufType::kBool) CheckBools(c_.pos(), count);
      c_.Skip(bytes, "array elements");
    }
  }

  void ParseArray(uint32_t node) {
    std::vector<Frame> stack;
    BeginArray(node, 1, stack);
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next == top.count) {
        stack.pop_back();
        continue;
      }
      const auto child = static_cast<uint32_t>(top.first + top.next);
      const int depth = top.depth;
      ++top.next;
      d_.nodes[child].type = GgufType::kArray;
      BeginArray(child, depth, stack);  // may push (invalidates `top`, which is no longer used)
    }
  }

  FileData& d_;
  Cursor& c_;
};

// a * b for non-negative int64 values; false on overflow.
bool MulOk(int64_t a, int64_t b, int64_t* out) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

std::string DimsText(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

void ParseTensorInfos(FileData& d, Cursor& c, uint64_t n_tensors) {
  d.tensors.reserve(static_cast<size_t>(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    c.set_item(fmt::format("tensor info {}", i));
    const std::string_view name = c.ReadString("tensor name");
    if (name.empty()) c.Fail("tensor name is empty");
    if (name.size() > kGgufMaxTensorName) {
      c.Fail(fmt::format("tensor name '{}...' is {} bytes long, more than the {} the format allows",
                         name.substr(0, kGgufMaxTensorName), name.size(), kGgufMaxTensorName));
    }
    c.set_item(fmt::format("tensor '{}'", name));
    GgufTensorInfo t;
    t.name = name;
    const uint32_t n_dims = c.Read<uint32_t>("n_dimensions");
    if (n_dims < 1 || n_dims > 4) c.Fail(fmt::format("n_dimensions must be in [1, 4], got {}", n_dims));
    t.n_dims = static_cast<int>(n_dims);
    t.ne = {1, 1, 1, 1};
    for (uint32_t j = 0; j < n_dims; ++j) {
      const uint64_t dim = c.Read<uint64_t>("dimension");
      if (dim < 1 || dim > kMaxI64) c.Fail(fmt::format("dimension {} must be in [1, 2^63-1], got {}", j, dim));
      t.ne[j] = static_cast<int64_t>(dim);
    }
    const uint32_t type_id = c.Read<uint32_t>("type");
    const uint64_t offset = c.Read<uint64_t>("offset");
    const GgmlTypeTraits* traits = FindGgmlType(type_id);
    if (traits == nullptr) c.Fail(fmt::format("unknown ggml type id {}", type_id));
    t.type = traits->type;
    int64_t n_elements = 1;
    for (int j = 0; j < t.n_dims; ++j) {
      if (!MulOk(n_elements, t.ne[j], &n_elements)) {
        c.Fail(fmt::format("element count of dimensions {} overflows int64", DimsText(t.ne.data(), t.n_dims)));
      }
    }
    t.n_elements = n_elements;
    if (t.ne[0] % traits->block_size != 0) {
      c.Fail(fmt::format("row of {} values (ne[0]) is not a whole number of {}-value blocks of type {}", t.ne[0],
                         traits->block_size, traits->name));
    }
    int64_t n_bytes = 0;
    if (!MulOk(n_elements / traits->block_size, traits->type_size, &n_bytes)) {
      c.Fail(fmt::format("byte size of {} {} values overflows int64", n_elements, traits->name));
    }
    t.n_bytes = static_cast<uint64_t>(n_bytes);
    t.offset = offset;
    if (!d.tensor_index.emplace(name, d.tensors.size()).second) c.Fail("duplicate tensor name");
    d.tensors.push_back(t);
  }
  c.set_item("");
}

void PlaceTensors(FileData& d, Cursor& c) {
  const uint64_t file_size = d.file->size();
  const uint64_t a = d.alignment;
  const uint64_t end_of_infos = c.pos();
  // Align up without overflow: end_of_infos <= file_size < 2^63.
  const uint64_t data_offset = (end_of_infos + a - 1) / a * a;
  d.data_offset = data_offset;
  if (d.tensors.empty()) return;
  if (data_offset > file_size) {
    c.Fail(fmt::format("truncated: the tensor data section starts at offset {} (tensor infos end at {}, aligned "
                       "to {}), but the file has {} bytes",
                       data_offset, end_of_infos, a, file_size));
  }
  const uint64_t data_size = file_size - data_offset;
  for (GgufTensorInfo& t : d.tensors) {
    c.set_item(fmt::format("tensor '{}'", t.name));
    if (t.offset % a != 0) {
      c.Fail(fmt::format("offset {} is not a multiple of the alignment {}", t.offset, a));
    }
    if (t.offset > data_size || t.n_bytes > data_size - t.offset) {
      c.Fail(fmt::format("data [{}, {}) ({} {} bytes) runs past the end of the data section ({} bytes from file "
                         "offset {}): truncated file or bad offset",
                         t.offset, t.offset > kMaxU64 - t.n_bytes ? std::string("overflow")
                                                                   : std::to_string(t.offset + t.n_bytes),
                         t.n_bytes, GgmlTypeName(t.type), data_size, data_offset));
    }
    t.data = d.at(data_offset + t.offset);
  }
  std::vector<size_t> order(d.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return d.tensors[x].offset < d.tensors[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const GgufTensorInfo& prev = d.tensors[order[k - 1]];
    const GgufTensorInfo& next = d.tensors[order[k]];
    if (prev.offset + prev.n_bytes > next.offset) {
      c.set_item(fmt::format("tensor '{}'", next.name));
      c.Fail(fmt::format("data [{}, {}) overlaps tensor '{}' at [{}, {})", next.offset, next.offset + next.n_bytes,
                         prev.name, prev.offset, prev.offset + prev.n_bytes));
    }
  }
  c.set_item("");
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------

std::string GgufTypeName(GgufType type) {
  switch (type) {
    case GgufType::kUint8: return "uint8";
    case GgufType::kInt8: return "int8";
    case GgufType::kUint16: return "uint16";
    case GgufType::kInt16: return "int16";
    case GgufType::kUint32: return "uint32";
    case GgufType::kInt32: return "int32";
    case GgufType::kFloat32: return "float32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kUint64: return "uint64";
    case GgufType::kInt64: return "int64";
    case GgufType::kFloat64: return "float64";
  }
  return fmt::format("type {}", static_cast<uint32_t>(type));
}

bool IsIntegerType(GgufType type) {
  switch (type) {
    case GgufType::kUint8:
    case GgufType::kInt8:
    case GgufType::kUint16:
    case GgufType::kInt16:
    case GgufType::kUint32:
    case GgufType::kInt32:
    case GgufType::kUint64:
    case GgufType::kInt64: return true;
    default: return false;
  }
}

std::vector<int64_t> GgufTensorInfo::Shape() const {
  std::vector<int64_t> shape;
  for (int j = n_dims - 1; j >= 0; --j) shape.push_back(ne[j]);
  return shape;
}

GgufFile::GgufFile(std::unique_ptr<FileData> data) : data_(std::move(data)) {}
GgufFile::GgufFile(GgufFile&&) noexcept = default;
GgufFile& GgufFile::operator=(GgufFile&&) noexcept = default;
GgufFile::~GgufFile() = default;

GgufFile GgufFile::Open(const std::string& path) { return Parse(MappedFile::Open(path)); }

GgufFile GgufFile::Parse(std::shared_ptr<const MappedFile> file) {
  auto d = std::make_unique<FileData>();
  d->file = std::move(file);
  Cursor c(d->file->data(), d->file->size(), d->file->path());

  c.set_item("header");
  const uint32_t magic = c.Read<uint32_t>("magic");
  if (magic != 0x46554747u) {  // "GGUF" little-endian
    c.Fail(fmt::format("magic must be \"GGUF\" (0x46554747), got 0x{:08x}: not a GGUF file", magic));
  }
  d->version = c.Read<uint32_t>("version");
  if (d->version != 2 && d->version != 3) {
    if ((d->version & 0xffffu) == 0 && d->version != 0) {
      c.Fail(fmt::format("version {} (0x{:08x}) looks byte-swapped: big-endian GGUF files are not supported",
                         d->version, d->version));
    }
    c.Fail(fmt::format("version must be 2 or 3, got {}{}", d->version,
                       d->version == 1 ? " (GGUF v1 is obsolete; re-convert the model)" : ""));
  }
  const uint64_t n_tensors = c.Read<uint64_t>("tensor_count");
  const uint64_t n_kv = c.Read<uint64_t>("metadata_kv_count");
  // Lower bounds on the bytes each entry takes: key (8-byte length) + type (4) + smallest value (1); tensor
  // info: name length (8) + n_dims (4) + one dim (8) + type (4) + offset (8).
  if (n_kv > c.remaining() / 13) {
    c.Fail(fmt::format("truncated or corrupt: metadata_kv_count {} is more than the remaining {} bytes can hold", n_kv,
                       c.remaining()));
  }
  if (n_tensors > c.remaining() / 32) {
    c.Fail(fmt::format("truncated or corrupt: tensor_count {} is more than the remaining {} bytes can hold", n_tensors,
                       c.remaining()));
  }

  Parser parser(*d, c);
  d->keys.reserve(static_cast<size_t>(n_kv));
  d->key_nodes.reserve(static_cast<size_t>(n_kv));
  for (uint64_t i = 0; i < n_kv; ++i) {
    c.set_item(fmt::format("metadata entry {}", i));
    const std::string_view key = c.ReadString("key");
    if (key.empty()) c.Fail("key is empty");
    if (key.size() > kGgufMaxKeyLength) {
      c.Fail(fmt::format("key is {} bytes long, more than the {} the format allows", key.size(), kGgufMaxKeyLength));
    }
    c.set_item(fmt::format("key '{}'", key));
    const uint32_t type_id = c.Read<uint32_t>("value type");
    if (!IsKnownType(type_id)) c.Fail(fmt::format("value type {} is not a GGUF value type", type_id));
    if (!d->key_index.emplace(key, static_cast<uint32_t>(d->keys.size())).second) c.Fail("duplicate key");
    const auto node = static_cast<uint32_t>(d->nodes.size());
    d->nodes.emplace_back();
    d->keys.push_back(key);
    d->key_nodes.push_back(node);
    parser.ParseValue(node, static_cast<GgufType>(type_id));
  }
  c.set_item("");

  GgufFile out(std::move(d));
  FileData& data = *out.data_;
  if (out.Has("general.alignment")) {
    c.set_item("key 'general.alignment'");
    const GgufType t = out.TypeOf("general.alignment");
    if (!IsIntegerType(t)) c.Fail(fmt::format("must be an integer, got {}", GgufTypeName(t)));
    const int64_t a = out.GetInt64("general.alignment");
    if (a < 1 || a > (int64_t{1} << 30) || (a & (a - 1)) != 0) {
      c.Fail(fmt::format("must be a power of two in [1, 2^30], got {}", a));
    }
    data.alignment = static_cast<uint32_t>(a);
  }
  ParseTensorInfos(data, c, n_tensors);
  PlaceTensors(data, c);
  return out;
}

const std::string& GgufFile::path() const { return data_->path(); }
uint32_t GgufFile::version() const { return data_->version; }
uint32_t GgufFile::alignment() const { return data_->alignment; }
uint64_t GgufFile::data_offset() const { return data_->data_offset; }
const std::shared_ptr<const MappedFile>& GgufFile::file() const { return data_->file; }
const std::vector<std::string_view>& GgufFile::keys() const { return data_->keys; }
const std::vector<GgufTensorInfo>& GgufFile::tensors() const { return data_->tensors; }

bool GgufFile::Has(std::string_view key) const { return data_->key_index.count(key) != 0; }

namespace {

const Node* FindNode(const FileData& d, std::string_view key) {
  auto it = d.key_index.find(key);
  return it == d.key_index.end() ? nullptr : &d.nodes[d.key_nodes[it->second]];
}

const Node& RequireNode(const FileData& d, std::string_view key) {
  const Node* n = FindNode(d, key);
  if (n == nullptr) throw ConfigError(fmt::format("{}: required key '{}' is missing", d.path(), key));
  return *n;
}

[[noreturn]] void WrongType(const FileData& d, std::string_view key, const char* expected, GgufType actual) {
  throw ConfigError(fmt::format("{}: key '{}' must be {}, got {}", d.path(), key, expected, GgufTypeName(actual)));
}

int64_t NodeInt64(const FileData& d, const Node& n, std::string_view key) {
  IntValue v;
  if (!LoadInteger(d.at(n.offset), n.type, &v)) WrongType(d, key, "an integer", n.type);
  if (v.negative) return v.s;
  if (v.u > kMaxI64) throw ConfigError(fmt::format("{}: key '{}' = {} does not fit in int64", d.path(), key, v.u));
  return static_cast<int64_t>(v.u);
}

double NodeFloat(const FileData& d, const Node& n, std::string_view key) {
  if (n.type == GgufType::kFloat32) return Load<float>(d.at(n.offset));
  if (n.type == GgufType::kFloat64) return Load<double>(d.at(n.offset));
  WrongType(d, key, "a float32 or float64", n.type);
}

bool NodeBool(const FileData& d, const Node& n, std::string_view key) {
  if (n.type != GgufType::kBool) WrongType(d, key, "a bool", n.type);
  return *d.at(n.offset) != 0;
}

std::string_view NodeString(const FileData& d, const Node& n, std::string_view key) {
  if (n.type != GgufType::kString) WrongType(d, key, "a string", n.type);
  return {reinterpret_cast<const char*>(d.at(n.offset)), static_cast<size_t>(n.aux)};
}

}  // namespace

GgufType GgufFile::TypeOf(std::string_view key) const { return RequireNode(*data_, key).type; }

int64_t GgufFile::GetInt64(std::string_view key) const { return NodeInt64(*data_, RequireNode(*data_, key), key); }

uint64_t GgufFile::GetUInt64(std::string_view key) const {
  const Node& n = RequireNode(*data_, key);
  IntValue v;
  if (!LoadInteger(data_->at(n.offset), n.type, &v)) WrongType(*data_, key, "an integer", n.type);
  if (v.negative) throw ConfigError(fmt::format("{}: key '{}' must be >= 0, got {}", path(), key, v.s));
  return v.u;
}

double GgufFile::GetFloat(std::string_view key) const { return NodeFloat(*data_, RequireNode(*data_, key), key); }
bool GgufFile::GetBool(std::string_view key) const { return NodeBool(*data_, RequireNode(*data_, key), key); }
std::string_view GgufFile::GetString(std::string_view key) const {
  return NodeString(*data_, RequireNode(*data_, key), key);
}

GgufArray GgufFile::GetArray(std::string_view key) const {
  const Node& n = RequireNode(*data_, key);
  if (n.type != GgufType::kArray) WrongType(*data_, key, "an array", n.type);
  const auto it = data_->key_index.find(key);
  return GgufArray(data_.get(), data_->key_nodes[it->second], data_->keys[it->second]);
}

std::optional<int64_t> GgufFile::FindInt64(std::string_view key) const {
  const Node* n = FindNode(*data_, key);
  if (n == nullptr) return std::nullopt;
  return NodeInt64(*data_, *n, key);
}
std::optional<double> GgufFile::FindFloat(std::string_view key) const {
  const Node* n = FindNode(*data_, key);
  if (n == nullptr) return std::nullopt;
  return NodeFloat(*data_, *n, key);
}
std::optional<bool> GgufFile::FindBool(std::string_view key) const {
  const Node* n = FindNode(*data_, key);
  if (n == nullptr) return std::nullopt;
  return NodeBool(*data_, *n, key);
}
std::optional<std::string_view> GgufFile::FindString(std::string_view key) const {
  const Node* n = FindNode(*data_, key);
  if (n == nullptr) return std::nullopt;
  return NodeString(*data_, *n, key);
}
std::optional<GgufArray> GgufFile::FindArray(std::string_view key) const {
  if (!Has(key)) return std::nullopt;
  return GetArray(key);
}

const GgufTensorInfo* GgufFile::FindTensor(std::string_view name) const {
  auto it = data_->tensor_index.find(name);
  return it == data_->tensor_index.end() ? nullptr : &data_->tensors[it->second];
}

const GgufTensorInfo& GgufFile::GetTensor(std::string_view name) const {
  const GgufTensorInfo* t = FindTensor(name);
  if (t == nullptr) throw ConfigError(fmt::format("{}: required tensor '{}' is missing", path(), name));
  return *t;
}

// ---- GgufArray -------------------------------------------------------------------------------------------------

namespace {

[[noreturn]] void ArrayWrongType(const FileData& d, std::string_view key, const char* expected, GgufType actual) {
  throw ConfigError(fmt::format("{}: key '{}': array elements must be {}, got {}", d.path(), key, expected,
                                GgufTypeName(actual)));
}

}  // namespace

GgufType GgufArray::element_type() const { return data_->nodes[node_].elem_type; }
size_t GgufArray::size() const { return static_cast<size_t>(data_->nodes[node_].count); }

namespace {

void CheckIndex(const FileData& d, std::string_view key, size_t i, uint64_t count) {
  if (i >= count) {
    throw RangeError(fmt::format("{}: key '{}': array index {} is out of range (size {})", d.path(), key, i, count));
  }
}

}  // namespace

int64_t GgufArray::Int64At(size_t i) const {
  const Node& n = data_->nodes[node_];
  CheckIndex(*data_, key_, i, n.count);
  IntValue v;
  if (!LoadInteger(data_->at(n.offset + i * FixedSize(n.elem_type)), n.elem_type, &v)) {
    ArrayWrongType(*data_, key_, "integers", n.elem_type);
  }
  if (v.negative) return v.s;
  if (v.u > kMaxI64) {
    throw ConfigError(fmt::format("{}: key '{}': element {} = {} does not fit in int64", data_->path(), key_, i, v.u));
  }
  return static_cast<int64_t>(v.u);
}

double GgufArray::FloatAt(size_t i) const {
  const Node& n = data_->nodes[node_];
  CheckIndex(*data_, key_, i, n.count);
  if (n.elem_type == GgufType::kFloat32) return Load<float>(data_->at(n.offset + 4 * i));
  if (n.elem_type == GgufType::kFloat64) return Load<double>(data_->at(n.offset + 8 * i));
  ArrayWrongType(*data_, key_, "float32 or float64", n.elem_type);
}

bool GgufArray::BoolAt(size_t i) const {
  const Node& n = data_->nodes[node_];
  CheckIndex(*data_, key_, i, n.count);
  if (n.elem_type != GgufType::kBool) ArrayWrongType(*data_, key_, "bool", n.elem_type);
  return *data_->at(n.offset + i) != 0;
}

std::string_view GgufArray::StringAt(size_t i) const {
  const Node& n = data_->nodes[node_];
  CheckIndex(*data_, key_, i, n.count);
  if (n.elem_type != GgufType::kString) ArrayWrongType(*data_, key_, "strings", n.elem_type);
  return data_->strings[static_cast<size_t>(n.aux + i)];
}

GgufArray GgufArray::ArrayAt(size_t i) const {
  const Node& n = data_->nodes[node_];
  CheckIndex(*data_, key_, i, n.count);
  if (n.elem_type != GgufType::kArray) ArrayWrongType(*data_, key_, "arrays", n.elem_type);
  return GgufArray(data_, static_cast<uint32_t>(n.aux + i), key_);
}

std::span<const std::string_view> GgufArray::Strings() const {
  const Node& n = data_->nodes[node_];
  if (n.elem_type != GgufType::kString) ArrayWrongType(*data_, key_, "strings", n.elem_type);
  return {data_->strings.data() + n.aux, static_cast<size_t>(n.count)};
}

std::vector<float> GgufArray::ToFloat32() const {
  const Node& n = data_->nodes[node_];
  std::vector<float> out(static_cast<size_t>(n.count));
  const uint8_t* p = data_->at(n.offset);
  if (n.elem_type == GgufType::kFloat32) {
    if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
  } else if (n.elem_type == GgufType::kFloat64) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(Load<double>(p + 8 * i));
  } else {
    ArrayWrongType(*data_, key_, "float32 or float64", n.elem_type);
  }
  return out;
}

std::vector<int64_t> GgufArray::ToInt64() const {
  const Node& n = data_->nodes[node_];
  if (!IsIntegerType(n.elem_type)) ArrayWrongType(*data_, key_, "integers", n.elem_type);
  std::vector<int64_t> out(static_cast<size_t>(n.count));
  for (size_t i = 0; i < out.size(); ++i) out[i] = Int64At(i);
  return out;
}

std::vector<int32_t> GgufArray::ToInt32() const {
  const Node& n = data_->nodes[node_];
  if (!IsIntegerType(n.elem_type)) ArrayWrongType(*data_, key_, "integers", n.elem_type);
  std::vector<int32_t> out(static_cast<size_t>(n.count));
  const uint8_t* p = data_->at(n.offset);
  if (n.elem_type == GgufType::kInt32) {  // the common case (token types): one copy
    if (!out.empty()) std::memcpy(out.data(), p, out.size() * 4);
    return out;
  }
  const uint64_t size = FixedSize(n.elem_type);
  for (size_t i = 0; i < out.size(); ++i) {
    IntValue v;
    LoadInteger(p + i * size, n.elem_type, &v);
    const bool fits = v.negative ? v.s >= std::numeric_limits<int32_t>::min()
                                 : v.u <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max());
    if (!fits) {
      throw ConfigError(
          fmt::format("{}: key '{}': element {} = {} does not fit in int32", data_->path(), key_, i, IntText(v)));
    }
    out[i] = v.negative ? static_cast<int32_t>(v.s) : static_cast<int32_t>(v.u);
  }
  return out;
}

std::span<const uint8_t> GgufArray::RawBytes() const {
  const Node& n = data_->nodes[node_];
  const uint64_t size = FixedSize(n.elem_type);
  if (size == 0) ArrayWrongType(*data_, key_, "numbers or bools", n.elem_type);
  return {data_->at(n.offset), static_cast<size_t>(n.count * size)};
}

}  // namespace posenc
