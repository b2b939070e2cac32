#include "posenc/tokenizer/tokenizer.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

const char* TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kNormal:
      return "normal";
    case TokenType::kUnknown:
      return "unknown";
    case TokenType::kControl:
      return "control";
    case TokenType::kUserDefined:
      return "user_defined";
    case TokenType::kUnused:
      return "unused";
    case TokenType::kByte:
      return "byte";
  }
  return "?";
}

std::vector<int> Tokenizer::Encode(std::string_view text, bool add_bos, bool add_eos) const {
  if (add_bos && bos_id() < 0) {
    throw ConfigError(fmt::format("cannot add BOS: the vocabulary ({}) has no BOS token", Describe()));
  }
  if (add_eos && eos_id() < 0) {
    throw ConfigError(fmt::format("cannot add EOS: the vocabulary ({}) has no EOS token", Describe()));
  }
  std::vector<int> body;
  if (special_ == nullptr) {
    body = EncodeText(text);
  } else {
    for (const AddedTokenMatcher::Segment& seg : special_->Split(text)) {
      if (seg.id >= 0) {
        body.push_back(seg.id);
      } else {
        const std::vector<int> run = EncodeText(text.substr(seg.begin, seg.end - seg.begin));
        body.insert(body.end(), run.begin(), run.end());
      }
    }
  }
  if (!add_bos && !add_eos) return body;
  std::vector<int> ids;
  ids.reserve(body.size() + 2);
  if (add_bos) ids.push_back(bos_id());
  ids.insert(ids.end(), body.begin(), body.end());
  if (add_eos) ids.push_back(eos_id());
  return ids;
}

void Tokenizer::set_parse_special(bool on) {
  special_ = on ? std::make_shared<const AddedTokenMatcher>(SpecialTokens()) : nullptr;
}

std::vector<AddedToken> Tokenizer::SpecialTokens() const {
  std::vector<AddedToken> tokens;
  for (int id = 0; id < vocab_size(); ++id) {
    const TokenType t = Type(id);
    if ((t == TokenType::kControl || t == TokenType::kUnknown) && !Piece(id).empty()) {
      tokens.push_back({id, Piece(id), false, false});
    }
  }
  return tokens;
}

int BytePieceValue(std::string_view p) {
  if (p.size() != 6 || p.substr(0, 3) != "<0x" || p[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(p[3]), lo = hex(p[4]);
  return hi >= 0 && lo >= 0 ? hi * 16 + lo : -1;
}

void CheckTokenId(int64_t id, int64_t vocab_size) {
  if (id < 0 || id >= vocab_size) {
    throw RangeError(fmt::format("token id must be in [0, vocab_size={}), got {}", vocab_size, id));
  }
}

void CheckTokenIds(std::span<const int> ids, int64_t vocab_size) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      throw RangeError(
          fmt::format("token id at position {} must be in [0, vocab_size={}), got {}", i, vocab_size, ids[i]));
    }
  }
}

}  // namespace posenc
