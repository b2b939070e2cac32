// Helpers for the format reader tests: fixture paths, a raw GGUF byte builder for malformed files, and
// exception checks that the message names the file and the field.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <initializer_list>
#include <string>
#include <unistd.h>
#include <vector>

namespace posenc::testing {

inline std::string ModelFixture(const std::string& name) {
  return std::string(POSENC_TEST_DATA_DIR) + "/models/" + name;
}
inline std::string SharedModel(const std::string& name) { return std::string(POSENC_SHARED_DIR) + "/models/" + name; }
inline bool Exists(const std::string& path) { return std::filesystem::exists(path); }

#define POSENC_SKIP_IF_ABSENT(path)                                                                          \
  do {                                                                                                       \
    if (!::posenc::testing::Exists(path)) GTEST_SKIP() << "large fixture absent: " << (path) << " (set "     \
                                                       << "POSENC_SHARED_DIR to the folder holding models/)"; \
  } while (0)

/// Runs f, expects an exception of type E whose message contains every string in `parts`.
template <typename E, typename F>
void ExpectThrowWith(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one containing '" << *parts.begin() << "'";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' not in: " << what;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

/// Little-endian byte appenders.
template <typename T>
void PutLe(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}
inline void PutStr(std::vector<uint8_t>& out, const std::string& s) {
  PutLe<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

/// One encoded metadata entry: key, u32 type id, then the payload bytes as given.
inline std::vector<uint8_t> RawKv(const std::string& key, uint32_t type, const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> out;
  PutStr(out, key);
  PutLe<uint32_t>(out, type);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}
inline std::vector<uint8_t> RawU32(uint32_t v) {
  std::vector<uint8_t> out;
  PutLe(out, v);
  return out;
}

/// A GGUF file assembled field by field, so that a test can put any value in any field.
struct RawTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;  // ggml order (ne[0] first)
  uint32_t type = 0;           // ggml type id
  uint64_t offset = 0;
  uint32_t n_dims_override = 0;  // when non-zero, written instead of dims.size()
};

struct RawGguf {
  uint32_t magic = 0x46554747u;
  uint32_t version = 3;
  int64_t n_tensors_override = -1;  // >= 0: written instead of tensors.size()
  int64_t n_kv_override = -1;
  std::vector<std::vector<uint8_t>> kvs;
  std::vector<RawTensorInfo> tensors;
  uint64_t alignment = 32;  // padding used before the data section (the file's general.alignment is a kv)
  std::vector<uint8_t> data;

  std::vector<uint8_t> Build() const {
    std::vector<uint8_t> out;
    PutLe(out, magic);
    PutLe(out, version);
    PutLe<uint64_t>(out, n_tensors_override >= 0 ? static_cast<uint64_t>(n_tensors_override) : tensors.size());
    PutLe<uint64_t>(out, n_kv_override >= 0 ? static_cast<uint64_t>(n_kv_override) : kvs.size());
    for (const auto& kv : kvs) out.insert(out.end(), kv.begin(), kv.end());
    for (const RawTensorInfo& t : tensors) {
      PutStr(out, t.name);
      PutLe<uint32_t>(out, t.n_dims_override ? t.n_dims_override : static_cast<uint32_t>(t.dims.size()));
      for (uint64_t d : t.dims) PutLe(out, d);
      PutLe(out, t.type);
      PutLe(out, t.offset);
    }
    out.resize((out.size() + alignment - 1) / alignment * alignment, 0);
    out.insert(out.end(), data.begin(), data.end());
    return out;
  }
};

/// A fresh empty folder under the test temp dir (removed by the caller's TempDir destructor).
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("posenc_" + tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

}  // namespace posenc::testing
