// Read-only bytes of a model file: memory-mapped from disk, or held in memory (tests, fuzzing).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

/// The bytes of one file, read-only, alive as long as any shared_ptr to it. Readers (GGUF, safetensors,
/// llama2.c) keep a shared_ptr so that tensor views into the mapping never dangle.
class MappedFile {
 public:
  /// Maps a regular file read-only (mmap, MAP_PRIVATE). The path is checked with stat before it is opened, so
  /// a directory, FIFO, socket or device is refused without blocking; an empty file gives an empty span.
  ///
  /// `role` names what the file is for in every message ("tokenizer", "model", ...).
  /// Errors: IoError naming the role, the path and the reason: it does not exist or cannot be read (strerror text), it is
  ///         a directory, it is not a regular file (FIFO, socket, device), or mmap fails.
  static std::shared_ptr<const MappedFile> Open(const std::string& path, std::string_view role = "file");

  /// Wraps bytes already in memory; `name` stands for the path in every error message (e.g. "<memory>").
  static std::shared_ptr<const MappedFile> FromBytes(std::vector<uint8_t> bytes, std::string name);

  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  /// The whole file, [0, size()).
  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  /// The path it was opened from (or the name given to FromBytes), for error messages.
  const std::string& path() const { return path_; }
  /// True when the bytes are an mmap of a file (false for FromBytes and for empty files).
  bool is_mapped() const { return mapping_ != nullptr; }

 private:
  MappedFile() = default;

  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  void* mapping_ = nullptr;     // mmap base, or nullptr
  std::vector<uint8_t> owned_;  // FromBytes storage
};

}  // namespace posenc
