// llama2.c BPE tokenizer (`tokenizer.bin` / `tok512.bin`): reading, encoding and decoding.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace posenc {

/// Token ids fixed by the llama2.c export (sentencepiece conventions).
inline constexpr int kBosId = 1;  // piece "\n<s>\n"
inline constexpr int kEosId = 2;  // piece "\n</s>\n"

/// A llama2.c tokenizer: vocab_size pieces with their BPE merge scores.
class Tokenizer {
 public:
  /// Parses a llama2.c tokenizer file's bytes: int32 max_token_length, then per piece float32 score,
  /// int32 len, len bytes (no NUL). The vocabulary size is not in the file: it comes from the checkpoint.
  /// Errors: IoError naming `source` if the bytes end inside a piece ("tokenizer '...' is truncated in piece
  ///         i of vocab_size ..."), if bytes are left after vocab_size pieces ("... has N trailing bytes after
  ///         vocab_size pieces: written for a different vocabulary"), or if a piece length is negative or
  ///         exceeds max_token_length; ConfigError if vocab_size < 3 (BOS and EOS are ids 1 and 2).
  /// Source: llama2.c run.c `build_tokenizer`.
  static Tokenizer FromBytes(std::string_view bytes, int64_t vocab_size, const std::string& source = "<memory>");

  /// Reads a tokenizer file. Errors: IoError if it cannot be read (names the path); as FromBytes.
  static Tokenizer Load(const std::string& path, int64_t vocab_size);

  /// llama2.c `encode`: optional BOS; if `text` is non-empty, the id of the piece " " (dummy prefix); each
  /// UTF-8 code point (a lead byte plus up to 3 continuation bytes) becomes the id of the equal piece or, if
  /// there is none, one id per byte (byte + 3); then the adjacent pair whose concatenation is a piece with
  /// the highest score is merged, leftmost on ties, until no pair merges; optional EOS.
  /// Complexity: O(n log n) in the byte length (heap of candidate merges ordered by (score desc, position
  /// asc), entries invalidated lazily), identical in result to llama2.c's O(n^2) loop.
  /// Errors: ConfigError if text is non-empty and the vocabulary has no " " piece.
  /// Source: llama2.c run.c `encode`; text bytes are taken as they are (no UTF-8 validation, as run.c).
  std::vector<int> Encode(std::string_view text, bool bos, bool eos) const;

  /// The bytes token `token` prints as after token `prev` (llama2.c `decode`): after BOS a leading space is
  /// dropped; a piece "<0xHH>" becomes the single byte HH.
  /// Errors: RangeError if token is outside [0, vocab_size).
  std::string DecodePiece(int prev, int token) const;

  /// Concatenated DecodePiece over ids (BOS itself prints nothing, as in llama2.c generation output).
  std::string Decode(const std::vector<int>& ids) const;

  int64_t vocab_size() const { return static_cast<int64_t>(pieces_.size()); }
  int max_token_length() const { return max_token_length_; }
  const std::string& piece(int id) const { return pieces_.at(static_cast<size_t>(id)); }
  float score(int id) const { return scores_.at(static_cast<size_t>(id)); }
  /// Id of the piece equal to `text` (the first such id), or -1.
  int Lookup(std::string_view text) const;

 private:
  struct Merge {
    float score;  // score of the merged piece
    int id;       // merged piece id
  };
  void BuildIndex();

  int max_token_length_ = 0;
  std::vector<std::string> pieces_;  // [vocab_size]
  std::vector<float> scores_;        // [vocab_size]
  std::unordered_map<std::string, int> lookup_;   // piece text -> first id with that text
  int byte_piece_[256];                           // single-byte piece ids (-1: none)
  std::unordered_map<uint64_t, Merge> merges_;    // (left id << 32 | right id) -> merge
};

}  // namespace posenc
