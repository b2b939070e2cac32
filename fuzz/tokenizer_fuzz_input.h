// Shared by the tokenizer fuzz harnesses: reads small structured values (counts, choices, strings over an
// alphabet) from the fuzzer's bytes, and stops the run loudly when an oracle fails.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace posenc::fuzz {

/// A cursor over the input; reads past the end give zeros.
class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  /// A value in [0, n) (n >= 1).
  size_t Below(size_t n) { return Byte() % n; }
  bool Bit() { return Byte() & 1; }
  /// `len` symbols of `alphabet`, concatenated.
  std::string Text(const std::vector<std::string>& alphabet, size_t len) {
    std::string s;
    for (size_t i = 0; i < len; ++i) s += alphabet[Below(alphabet.size())];
    return s;
  }
  /// The bytes not read yet.
  std::string_view Rest() {
    const std::string_view r(reinterpret_cast<const char*>(data_ + pos_), size_ - pos_);
    pos_ = size_;
    return r;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

/// Stops the process with a message (libFuzzer keeps the input as a crash) if `ok` is false.
inline void Require(bool ok, const char* harness, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "%s: %s\n", harness, what);
    std::abort();
  }
}

}  // namespace posenc::fuzz
