#include "posenc/tokenizer/byte_level.h"

#include "posenc/tokenizer/utf8.h"

namespace posenc {

ByteLevelMap::ByteLevelMap() {
  byte_of_.fill(-1);
  uint32_t next = 0x100;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
    AppendUtf8(cp, chars_[static_cast<size_t>(b)]);
    byte_of_[cp] = static_cast<int16_t>(b);
  }
}

const ByteLevelMap& ByteLevelMap::Get() {
  static const ByteLevelMap map;
  return map;
}

std::string ByteLevelMap::Encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += chars_[static_cast<unsigned char>(c)];
  return out;
}

bool ByteLevelMap::Decode(std::string_view text, std::string& out) const {
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = ValidUtf8Length(text, pos);
    if (n == 0) return false;
    const uint32_t cp = DecodeUtf8(text, pos, n);
    if (cp >= byte_of_.size() || byte_of_[cp] < 0) return false;
    out += static_cast<char>(byte_of_[cp]);
    pos += n;
  }
  return true;
}

}  // namespace posenc
