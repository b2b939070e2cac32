// Byte-level BPE (GPT-2 family; GGUF tokenizer.ggml.model = "gpt2", Hugging Face tokenizer.json "BPE" with a
// ByteLevel pre-tokenizer): pre-tokenizer words, bytes mapped to printable characters, merges by rank.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "posenc/tokenizer/added_tokens.h"
#include "posenc/tokenizer/pretokenize.h"
#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// A byte-level BPE vocabulary.
struct BpeVocab {
  std::vector<std::string> tokens;  // [n] token texts in the byte-level alphabet ("Ġthe"); added tokens raw
  std::vector<TokenType> types;     // [n]
  std::vector<std::pair<std::string, std::string>> merges;  // [n_merges] in rank order (rank 0 merges first)
  std::vector<AddedToken> added;    // tokens matched whole in the raw text (user-defined / HF non-special added)
  int bos_id = -1;                  // -1: none
  int eos_id = -1;
  int unk_id = -1;                  // used for a byte whose character is not a token (never silently dropped)
  bool add_bos = false;
  bool add_eos = false;
  bool ignore_merges = false;       // a word that is itself a token is taken whole (Llama 3, HF ignore_merges)
  bool nfc = false;                 // each plain-text run is put in NFC first (tokenizer.json normalizer "NFC")
  std::vector<AddedToken> special;  // the special tokens matched in the text under parse_special (HF special added
                                    // tokens, with their lstrip / rstrip); empty: the control and unknown tokens
  std::string source;               // where it was read from, for messages and Describe
};

/// Byte-level BPE encoding, as Hugging Face tokenizers' BPE model and llama.cpp's `llm_tokenizer_bpe`.
///
/// Encode: the text is cut at the added tokens (kept whole, leftmost-longest); each other run is put in NFC if
/// the vocabulary says so (NormalizeNfc), then split into words by the pre-tokenizer; each word's bytes become
/// characters of the byte-level map, one symbol each; the adjacent pair with the lowest merge rank merges, leftmost on
/// ties, until none does (with ignore_merges, a word that is a token is taken whole first). A final symbol always is a
/// token when the vocabulary holds all 256 byte characters; otherwise a byte whose character is missing becomes the
/// unknown token, or the vocabulary is rejected at encode with a ConfigError naming the byte (never dropped).
/// Decode: control tokens give nothing, added / user-defined tokens their text, the others their characters
/// mapped back to bytes (a token with a character outside the map: its text as is, as HF's ByteLevel decoder).
/// Source: Hugging Face tokenizers models/bpe/word.rs `merge_all` (heap by (rank, position)) and
/// pre_tokenizers/byte_level.rs; llama.cpp src/llama-vocab.cpp (the BPE `tokenize`, build b4748).
class BpeTokenizer final : public Tokenizer {
 public:
  /// Validates and indexes the vocabulary.
  /// Errors: ConfigError naming `source` and the value if the vocabulary is empty or too large, the arrays
  /// differ in length, a non-empty token text appears twice, a merge names a token that is not in the
  /// vocabulary (either side, or the merged text), an added token's id is out of range or its content is
  /// empty, or bos/eos/unk is outside [-1, n).
  BpeTokenizer(BpeVocab vocab, PreTokenizer pre_tokenizer);

  /// The plain loop per word: merge the adjacent pair with the lowest rank (a map from the two symbols'
  /// texts), leftmost on ties, until none merges; O(n^2) per word. The reference Encode is checked against.
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
  std::vector<AddedToken> SpecialTokens() const override;

  /// The vocabulary and pre-tokenizer as given (validated).
  const BpeVocab& vocab() const { return vocab_; }
  const PreTokenizer& pre_tokenizer() const { return pre_; }

 protected:
  std::vector<int> EncodeText(std::string_view text) const override;

 private:
  struct Merge {
    int rank;
    int id;  // the merged token
  };
  // Calls f(id) for every added token and f(-1, word) for each pre-tokenizer word, in order.
  template <typename F>
  void ForEachWord(std::string_view text, F&& f) const;
  void EncodeWord(std::string_view word, std::vector<int>& out) const;
  void EmitUnmappable(unsigned char byte, std::vector<int>& out) const;

  BpeVocab vocab_;
  PreTokenizer pre_;
  AddedTokenMatcher added_;
  std::unordered_map<std::string, int> lookup_;      // token text -> id
  std::unordered_map<uint64_t, Merge> merges_;       // (left id << 32 | right id) -> (rank, merged id)
  int byte_token_[256];                              // id of each byte's character, -1 if not a token
  std::vector<std::string> decoded_;                 // [n] the bytes each token decodes to
  // EncodeReference's own rank table by symbol texts, built on its first call.
  mutable std::once_flag reference_once_;
  mutable std::map<std::pair<std::string, std::string>, int> reference_ranks_;
};

}  // namespace posenc
