#include "posenc/formats/safetensors.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/json_reader.h"

namespace posenc {
namespace {

using nlohmann::json;

// dtypes the safetensors format defines; the value is the element size, 0 for those posenc does not read.
struct DType {
  const char* name;
  GgmlType type;
  int size;
  bool supported;
};
constexpr DType kDTypes[] = {
    {"F32", GgmlType::kF32, 4, true},   {"F16", GgmlType::kF16, 2, true},   {"BF16", GgmlType::kBF16, 2, true},
    {"F64", GgmlType::kF64, 8, false},  {"I64", GgmlType::kI64, 8, false},  {"I32", GgmlType::kI32, 4, false},
    {"I16", GgmlType::kI16, 2, false},  {"I8", GgmlType::kI8, 1, false},    {"U8", GgmlType::kI8, 1, false},
    {"U16", GgmlType::kI16, 2, false},  {"U32", GgmlType::kI32, 4, false},  {"U64", GgmlType::kI64, 8, false},
    {"BOOL", GgmlType::kI8, 1, false},  {"F8_E4M3", GgmlType::kI8, 1, false}, {"F8_E5M2", GgmlType::kI8, 1, false},
    {"F8_E8M0", GgmlType::kI8, 1, false}, {"C64", GgmlType::kF64, 8, false},
};

const DType* FindDType(const std::string& name) {
  for (const DType& d : kDTypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

// A non-negative JSON integer (unsigned or signed); false otherwise.
bool NonNegativeInteger(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    *out = static_cast<uint64_t>(v.get<int64_t>());
    return true;
  }
  return false;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

SafetensorsFile SafetensorsFile::Open(const std::string& path) { return Parse(MappedFile::Open(path)); }

SafetensorsFile SafetensorsFile::Parse(std::shared_ptr<const MappedFile> file) {
  SafetensorsFile out;
  out.file_ = std::move(file);
  const std::string& path = out.file_->path();
  const uint64_t size = out.file_->size();
  if (size < 8) {
    throw IoError(fmt::format("{}: truncated: the safetensors header length needs 8 bytes, the file has {}", path,
                              size));
  }
  uint64_t header_len;
  std::memcpy(&header_len, out.file_->data(), 8);
  if (header_len > size - 8) {
    throw IoError(fmt::format("{}: header length {} runs past the end of the file ({} bytes after the length)",
                              path, header_len, size - 8));
  }
  if (header_len > kSafetensorsMaxHeader) {
    throw IoError(fmt::format("{}: header length {} exceeds the limit of {} bytes", path, header_len,
                              kSafetensorsMaxHeader));
  }
  const std::string_view text(reinterpret_cast<const char*>(out.file_->data() + 8), static_cast<size_t>(header_len));
  const json header = ParseJsonStrict(text, path + ": header");
  if (!header.is_object()) {
    throw IoError(fmt::format("{}: header must be a JSON object, got {}", path, header.type_name()));
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  for (const auto& item : header.items()) {
    const std::string& name = item.key();  // not a structured binding: the lambda below captures it
    const json& entry = item.value();
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        throw IoError(fmt::format("{}: __metadata__ must be an object, got {}", path, entry.type_name()));
      }
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) {
          throw IoError(fmt::format("{}: __metadata__.{} must be a string, got {}", path, k, v.dump()));
        }
        out.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    auto fail = [&](const std::string& what) {
      throw IoError(fmt::format("{}: tensor '{}': {}", path, name, what));
    };
    if (name.empty()) throw IoError(fmt::format("{}: a tensor name is empty", path));
    if (!entry.is_object()) fail(fmt::format("entry must be an object, got {}", entry.type_name()));
    const auto dtype_it = entry.find("dtype");
    const auto shape_it = entry.find("shape");
    const auto offsets_it = entry.find("data_offsets");
    if (dtype_it == entry.end() || !dtype_it->is_string()) fail("'dtype' must be a string");
    if (shape_it == entry.end() || !shape_it->is_array()) fail("'shape' must be an array of integers");
    if (offsets_it == entry.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
      fail("'data_offsets' must be an array of two integers [begin, end]");
    }
    SafetensorsTensor t;
    t.name = name;
    t.dtype = dtype_it->get<std::string>();
    const DType* dtype = FindDType(t.dtype);
    if (dtype == nullptr) fail(fmt::format("unknown dtype '{}'", t.dtype));
    if (!dtype->supported) fail(fmt::format("dtype '{}' is not supported (F32, F16, BF16 are)", t.dtype));
    t.type = dtype->type;
    int64_t n = 1;
    bool overflow = false;
    for (const json& d : *shape_it) {
      uint64_t dim;
      if (!NonNegativeInteger(d, &dim) || dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(fmt::format("shape entries must be integers in [0, 2^63-1], got {}", d.dump()));
      }
      t.shape.push_back(static_cast<int64_t>(dim));
      if (dim != 0 && n > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(dim)) overflow = true;
      else n *= static_cast<int64_t>(dim);
    }
    if (std::find(t.shape.begin(), t.shape.end(), 0) != t.shape.end()) {
      n = 0;
      overflow = false;
    }
    if (overflow || n > std::numeric_limits<int64_t>::max() / dtype->size) {
      fail(fmt::format("shape {} x {} ({} bytes) overflows int64", ShapeText(t.shape), t.dtype, dtype->size));
    }
    t.n_elements = n;
    uint64_t begin, end;
    if (!NonNegativeInteger((*offsets_it)[0], &begin) || !NonNegativeInteger((*offsets_it)[1], &end)) {
      fail(fmt::format("data_offsets must be non-negative integers, got {}", offsets_it->dump()));
    }
    if (begin > end) fail(fmt::format("data_offsets [{}, {}): begin > end", begin, end));
    const uint64_t expected = static_cast<uint64_t>(n) * static_cast<uint64_t>(dtype->size);
    if (end - begin != expected) {
      fail(fmt::format("shape {} x {} ({} bytes each) = {} bytes, but data_offsets [{}, {}) hold {}",
                       ShapeText(t.shape), t.dtype, dtype->size, expected, begin, end, end - begin));
    }
    if (end > data_size) {
      fail(fmt::format("data_offsets [{}, {}) run past the end of the data buffer ({} bytes): truncated file or "
                       "bad offsets",
                       begin, end, data_size));
    }
    t.begin = begin;
    t.end = end;
    t.data = out.file_->data() + data_start + begin;
    out.tensors_.push_back(std::move(t));
  }
  std::sort(out.tensors_.begin(), out.tensors_.end(), [](const SafetensorsTensor& a, const SafetensorsTensor& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  size_t reach = 0;  // the tensor, among those before i, whose data ends last
  for (size_t i = 0; i < out.tensors_.size(); ++i) {
    const SafetensorsTensor& t = out.tensors_[i];
    if (i > 0 && t.end > t.begin) {  // empty tensors overlap nothing
      const SafetensorsTensor& prev = out.tensors_[reach];
      if (prev.end > t.begin) {
        throw IoError(fmt::format("{}: tensor '{}': data_offsets [{}, {}) overlap tensor '{}' at [{}, {})", path,
                                  t.name, t.begin, t.end, prev.name, prev.begin, prev.end));
      }
    }
    if (t.end > out.tensors_[reach].end) reach = i;
    out.index_.emplace(t.name, i);
  }
  return out;
}

const SafetensorsTensor* SafetensorsFile::FindTensor(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

// ---- Hugging Face checkpoint folder --------------------------------------------------------------------------------

const SafetensorsTensor* HfCheckpoint::FindTensor(std::string_view name) const {
  auto it = index.find(std::string(name));
  return it == index.end() ? nullptr : &shards[it->second.first].tensors()[it->second.second];
}

std::vector<std::string> HfCheckpoint::TensorNames() const {
  std::vector<std::string> names;
  names.reserve(index.size());
  for (const auto& [name, where] : index) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool IsFile(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

HfCheckpoint OpenHfCheckpoint(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    throw IoError(fmt::format("'{}' is not a Hugging Face checkpoint directory", dir));
  }
  HfCheckpoint ck;
  ck.dir = dir;
  ck.config_path = dir + "/config.json";
  if (!IsFile(ck.config_path)) throw IoError(fmt::format("{}: config.json is missing", dir));
  ck.config = ReadJsonFile(ck.config_path);
  if (!ck.config.is_object()) {
    throw IoError(fmt::format("{}: must be a JSON object, got {}", ck.config_path, ck.config.type_name()));
  }

  const std::string single = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (IsFile(single)) {
    ck.shards.push_back(SafetensorsFile::Open(single));
    ck.shard_names.push_back("model.safetensors");
    const std::vector<SafetensorsTensor>& tensors = ck.shards[0].tensors();
    for (size_t i = 0; i < tensors.size(); ++i) ck.index.emplace(tensors[i].name, std::make_pair(size_t{0}, i));
    return ck;
  }
  if (!IsFile(index_path)) {
    throw IoError(fmt::format("{}: neither model.safetensors nor model.safetensors.index.json is present", dir));
  }
  const nlohmann::json index = ReadJsonFile(index_path);
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) {
    throw IoError(fmt::format("{}: must hold a \"weight_map\" object", index_path));
  }
  std::map<std::string, std::vector<std::string>> by_shard;  // shard file name -> tensor names
  for (const auto& [name, shard] : map_it->items()) {
    if (!shard.is_string()) {
      throw IoError(fmt::format("{}: weight_map['{}'] must be a file name string, got {}", index_path, name,
                                shard.dump()));
    }
    const std::string file = shard.get<std::string>();
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos ||
        file.find('\\') != std::string::npos || file.find('\0') != std::string::npos) {
      throw IoError(fmt::format("{}: weight_map['{}'] = '{}' is not a plain file name in the checkpoint folder",
                                index_path, name, file));
    }
    by_shard[file].push_back(name);
  }
  for (const auto& [file, names] : by_shard) {
    const std::string shard_path = dir + "/" + file;
    if (!IsFile(shard_path)) {
      throw IoError(fmt::format("{}: weight_map names shard '{}' (for tensor '{}'), which is missing", index_path,
                                file, names.front()));
    }
    ck.shards.push_back(SafetensorsFile::Open(shard_path));
    ck.shard_names.push_back(file);
    const size_t s = ck.shards.size() - 1;
    const SafetensorsFile& shard = ck.shards[s];
    for (const std::string& name : names) {
      const SafetensorsTensor* t = shard.FindTensor(name);
      if (t == nullptr) {
        throw IoError(fmt::format("{}: weight_map puts tensor '{}' in '{}', which does not hold it", index_path,
                                  name, file));
      }
      ck.index.emplace(name, std::make_pair(s, static_cast<size_t>(t - shard.tensors().data())));
    }
  }
  return ck;
}

}  // namespace posenc
