// Tokens matched whole in the raw text before pre-tokenization and merges: SentencePiece user-defined pieces,
// GGUF USER_DEFINED tokens, Hugging Face added tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

/// One token kept whole.
struct AddedToken {
  int id = -1;
  std::string content;  // the exact text matched (non-empty)
  bool lstrip = false;  // the match also takes the whitespace on its left (HF AddedToken.lstrip)
  bool rstrip = false;  // ... and on its right (HF AddedToken.rstrip)
};

/// Splits a text into plain-text runs and added tokens.
///
/// Matching is leftmost-longest: scanning left to right, the first position where some token's content
/// starts wins, and of the tokens starting there the longest (Hugging Face tokenizers' AddedVocabulary uses an
/// Aho-Corasick automaton with LeftmostLongest). Whitespace is Unicode White_Space.
class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  /// Errors: ConfigError naming the id if a content is empty.
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  /// A run of the text: a token (id >= 0; [begin, end) covers its content and any stripped whitespace) or
  /// plain text (id == -1).
  struct Segment {
    int id;
    size_t begin, end;
  };
  /// The segments of `text` in order; they tile it exactly. No empty plain-text segment appears.
  std::vector<Segment> Split(std::string_view text) const;

  /// Number of tokens matched (0: Split returns the whole text as one plain segment).
  bool empty() const { return tokens_.empty(); }
  size_t size() const { return tokens_.size(); }

 private:
  std::vector<AddedToken> tokens_;
  std::vector<std::vector<int>> by_first_byte_;  // [256]: indices into tokens_, longest content first
};

}  // namespace posenc
