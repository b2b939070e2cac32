// A 64-bit fingerprint of options and files, and the start-up check that every rank runs with the same ones.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "posenc/dist/communicator.h"

namespace posenc {

/// Streaming 64-bit fingerprint: FNV-1a (Fowler, Noll, Vo; 64-bit offset basis and prime) run over the input's
/// little-endian 8-byte words in four interleaved lanes (word w goes to lane w % 4, so the multiplications of
/// the lanes overlap: several GB/s instead of FNV-1a's ~1 byte per multiply), the lanes, the trailing bytes and
/// the total length then folded by byte-wise FNV-1a. The value depends only on the byte sequence, not on how it
/// was split across Add calls. Not cryptographic: it catches ranks started with different inputs, not tampering.
class Fingerprint {
 public:
  Fingerprint();
  Fingerprint& Add(std::span<const std::byte> bytes);
  /// The string's length, then its bytes (so ("ab", "c") and ("a", "bc") differ).
  Fingerprint& Add(std::string_view text);
  /// The value's 8 little-endian bytes.
  Fingerprint& Add(int64_t value);
  uint64_t value() const;

 private:
  void Word(uint64_t w);
  std::array<uint64_t, 4> lanes_;
  std::array<std::byte, 32> pending_{};  // bytes not yet forming a full round of four words
  size_t n_pending_ = 0;
  uint64_t n_words_ = 0;
  uint64_t length_ = 0;
};

/// Fingerprint of `bytes` as "0x" + 16 lowercase hex digits (how a training report records its text).
std::string FingerprintHex(std::string_view bytes);

/// The fingerprint of a file's whole contents (read in 1 MiB pieces), preceded by its size.
/// Errors: IoError naming the path if it cannot be opened or read, or is not a regular file.
uint64_t FingerprintFile(const std::string& path);

/// Start-up check that every rank of `comm` has the same `fingerprint` of `what` (e.g. "options and model
/// file"). Collective: every rank must call it.
/// Errors: DistError on every rank if they differ, listing each value with the ranks that have it:
///   "ranks disagree on options and model file: 0x1f.. on ranks 0, 2; 0x9c.. on rank 1 (start every rank with
///   the same options and files)".
void CheckSameOnAllRanks(Communicator& comm, uint64_t fingerprint, std::string_view what);

}  // namespace posenc
