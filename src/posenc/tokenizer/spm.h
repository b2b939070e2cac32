// SentencePiece-style BPE over scored pieces (GGUF tokenizer.ggml.model = "llama"): the dummy-prefix space,
// "▁" for spaces, merges by piece score, byte fallback "<0xXX>", user-defined pieces kept whole.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "posenc/tokenizer/added_tokens.h"
#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// A SentencePiece BPE vocabulary as GGUF stores it.
struct SpmVocab {
  std::vector<std::string> tokens;  // [n] tokenizer.ggml.tokens (UTF-8; spaces written as "▁" U+2581)
  std::vector<float> scores;        // [n] tokenizer.ggml.scores: higher merges first
  std::vector<TokenType> types;     // [n] tokenizer.ggml.token_type
  int bos_id = -1;                  // tokenizer.ggml.bos_token_id (-1: none)
  int eos_id = -1;                  // tokenizer.ggml.eos_token_id
  int unk_id = -1;                  // tokenizer.ggml.unknown_token_id
  bool add_bos = true;              // tokenizer.ggml.add_bos_token (llama.cpp's SPM default: true)
  bool add_eos = false;             // tokenizer.ggml.add_eos_token
  bool add_space_prefix = true;     // tokenizer.ggml.add_space_prefix (sentencepiece add_dummy_prefix)
  std::string source;               // where it was read from, for messages and Describe
};

/// SentencePiece BPE encoding, as llama.cpp's `llm_tokenizer_spm` and the sentencepiece library do it.
///
/// Encode: the text is cut at user-defined tokens (kept whole, leftmost-longest); every other run gets a
/// leading " " when add_space_prefix and it starts the text or follows a user-defined token (llama.cpp;
/// Hugging Face normalizes each run between added tokens alike), its spaces become "▁", and it is split into
/// symbols of one UTF-8 character each; a byte that does not start a valid sequence is a symbol of its own
/// (llama.cpp takes the length its lead byte announces, which can swallow the next "▁"; the two differ only
/// on invalid UTF-8, which Hugging Face cannot take at all). The adjacent pair whose concatenation is a normal or unused piece with the highest score merges,
/// leftmost on ties, until none does (control, unknown and byte pieces are never formed from text, as in
/// sentencepiece; user-defined pieces only by the whole-text match, so their "▁" is never an escaped space). A final symbol that is not such a piece becomes its
/// bytes' "<0xXX>" pieces (byte fallback), or one unknown token when some byte has no byte piece.
/// Decode: "▁" becomes " ", byte pieces their byte, control tokens nothing, the others their text; with
/// add_space_prefix the first piece and the first piece after a user-defined token lose one leading space
/// (the exact inverse of Encode's prefix). A literal U+2581 in a text encodes like a space (as sentencepiece).
/// Source: llama.cpp src/llama-vocab.cpp `llm_tokenizer_spm` (b4748) and `tokenize_impl`; sentencepiece
/// bpe_model.cc (merge order: score desc, then leftmost).
class SpmTokenizer final : public Tokenizer {
 public:
  /// Validates and indexes the vocabulary.
  /// Errors: ConfigError naming `source`, the field and the value if the vocabulary is empty or has more than
  /// 2^31 - 1 tokens, the arrays differ in length, a score is NaN (no merge order exists), a non-empty token
  /// text appears twice, or bos/eos/unk is outside [-1, n).
  explicit SpmTokenizer(SpmVocab vocab);

  /// The plain loop: per run, merge the best-scoring adjacent pair (string concatenation looked up in the
  /// vocabulary), leftmost on ties, until no pair merges; O(n^2). The reference Encode is checked against.
  std::vector<int> EncodeReference(std::string_view text) const;

  /// The Tokenizer interface (tokenizer.h), with this family's Decode rules (class comment). Errors:
  /// RangeError for an id outside [0, vocab_size).
  std::string Decode(std::span<const int> ids) const override;
  const std::string& Piece(int id) const override;
  TokenType Type(int id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(vocab_.tokens.size()); }
  int bos_id() const override { return vocab_.bos_id; }
  int eos_id() const override { return vocab_.eos_id; }
  bool add_bos_default() const override { return vocab_.add_bos; }
  bool add_eos_default() const override { return vocab_.add_eos; }
  std::string Describe() const override;

  /// The vocabulary as given (validated).
  const SpmVocab& vocab() const { return vocab_; }

 protected:
  std::vector<int> EncodeText(std::string_view text) const override;

 private:
  // One run of text, ready to merge: its escaped text and the symbols' [begin, end) byte ranges in it.
  struct Run {
    std::string text;
    std::vector<uint32_t> ends;  // end offset of each symbol (begins are the previous end)
  };
  std::vector<Run> Runs(std::string_view text, std::vector<int>* added_ids) const;
  // Appends the ids of a final symbol (its text `s`, its key id) to out.
  void EmitSymbol(std::string_view s, int key, std::vector<int>& out) const;
  // Key id of a one-character symbol (1 to 4 bytes): its piece id if mergeable, a virtual id >= n if the
  // character occurs inside a mergeable piece, else -1 (it can never merge).
  int CharKey(std::string_view c) const;
  bool Mergeable(int id) const;

  SpmVocab vocab_;
  AddedTokenMatcher user_defined_;
  std::unordered_map<std::string, int> mergeable_;  // text -> id of normal and unused pieces
  std::unordered_map<uint64_t, int> char_key_;      // a character of a mergeable piece (packed bytes + length)
                                                    // -> its piece id, or a virtual id >= n if it is none
  int ascii_key_[128];                              // char_key_ of the one-byte characters (-1: none)
  std::unordered_map<uint64_t, int> merges_;        // (left key << 32 | right key) -> merged piece id
  std::unordered_set<uint64_t> joinable_;           // (key, key) of characters adjacent in some mergeable piece
  int byte_token_[256];                             // "<0xXX>" piece id per byte, -1 if none
};

}  // namespace posenc
