#include "posenc/tokenizer/added_tokens.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {
namespace {

// Length of the whitespace character ending at text[end) (0 if none starts a valid sequence there).
size_t WhitespaceBefore(std::string_view text, size_t begin, size_t end) {
  for (size_t n = 1; n <= 4 && n <= end - begin; ++n) {
    const size_t at = end - n;
    if (ValidUtf8Length(text, at) == n && IsUnicodeWhitespace(DecodeUtf8(text, at, n))) return n;
  }
  return 0;
}

size_t WhitespaceAt(std::string_view text, size_t pos) {
  const size_t n = ValidUtf8Length(text, pos);
  return n > 0 && IsUnicodeWhitespace(DecodeUtf8(text, pos, n)) ? n : 0;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  by_first_byte_.resize(256);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    if (tokens_[i].content.empty()) {
      throw ConfigError(fmt::format("added token {} has empty content", tokens_[i].id));
    }
    by_first_byte_[static_cast<unsigned char>(tokens_[i].content[0])].push_back(static_cast<int>(i));
  }
  for (auto& bucket : by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(),
                     [&](int a, int b) { return tokens_[a].content.size() > tokens_[b].content.size(); });
  }
}

std::vector<AddedTokenMatcher::Segment> AddedTokenMatcher::Split(std::string_view text) const {
  std::vector<Segment> out;
  if (tokens_.empty()) {
    if (!text.empty()) out.push_back({-1, 0, text.size()});
    return out;
  }
  size_t plain = 0;  // start of the current plain-text run
  size_t pos = 0;
  while (pos < text.size()) {
    const auto& bucket = by_first_byte_[static_cast<unsigned char>(text[pos])];
    const AddedToken* hit = nullptr;
    for (int i : bucket) {
      const std::string& c = tokens_[static_cast<size_t>(i)].content;
      if (c.size() <= text.size() - pos && std::memcmp(text.data() + pos, c.data(), c.size()) == 0) {
        hit = &tokens_[static_cast<size_t>(i)];
        break;
      }
    }
    if (hit == nullptr) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit->content.size();
    if (hit->lstrip) {
      while (begin > plain) {
        const size_t n = WhitespaceBefore(text, plain, begin);
        if (n == 0) break;
        begin -= n;
      }
    }
    if (hit->rstrip) {
      while (end < text.size()) {
        const size_t n = WhitespaceAt(text, end);
        if (n == 0) break;
        end += n;
      }
    }
    if (begin > plain) out.push_back({-1, plain, begin});
    out.push_back({hit->id, begin, end});
    plain = pos = end;
  }
  if (plain < text.size()) out.push_back({-1, plain, text.size()});
  return out;
}

}  // namespace posenc
