// The byte <-> printable-character map of byte-level BPE (GPT-2 and its descendants).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

/// The map of GPT-2 `bytes_to_unicode`: bytes 0x21..0x7E, 0xA1..0xAC and 0xAE..0xFF stand for the code point
/// of the same value; the other 68 bytes (0x00..0x20, 0x7F..0xA0, 0xAD), in increasing order, stand for
/// U+0100, U+0101, ... U+0143. Every byte of a text becomes one printable character, so a vocabulary of such
/// characters covers any byte string.
/// Source: openai/gpt-2 encoder.py `bytes_to_unicode`; Hugging Face tokenizers `ByteLevel` (same table).
class ByteLevelMap {
 public:
  /// The one shared table.
  static const ByteLevelMap& Get();

  /// UTF-8 of the character standing for byte b (1 or 2 bytes).
  const std::string& Char(unsigned char b) const { return chars_[b]; }

  /// Maps every byte of `bytes` to its character (the form merges and vocabularies are written in).
  std::string Encode(std::string_view bytes) const;

  /// Inverts Encode: each character of `text` back to its byte. Returns false (and leaves `out` partly
  /// written) if some character is not in the map or the text is not valid UTF-8.
  bool Decode(std::string_view text, std::string& out) const;

 private:
  ByteLevelMap();
  std::array<std::string, 256> chars_;
  std::array<int16_t, 0x144> byte_of_;  // code point -> byte, -1 if the code point stands for none
};

}  // namespace posenc
