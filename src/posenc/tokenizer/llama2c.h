// llama2.c BPE tokenizer (`tokenizer.bin` / `tok512.bin`): reading, encoding and decoding.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// Token ids fixed by the llama2.c export (sentencepiece conventions).
inline constexpr int kBosId = 1;  // piece "\n<s>\n"
inline constexpr int kEosId = 2;  // piece "\n</s>\n"

/// llama2.c's merge loop starts from best_score = -1e10 and takes a pair only if its score is strictly
/// greater: a piece whose score is NaN, -inf or <= -1e10 is never formed by a merge.
inline constexpr float kLlama2cMinMergeScore = -1e10f;

/// A llama2.c tokenizer: vocab_size pieces with their BPE merge scores.
///
/// Decode follows llama2.c's generation output rather than the interface's control-token rule: BOS prints
/// nothing, EOS prints its piece "\n</s>\n". Piece types: id 0 is the unknown token, ids 1 and 2 control
/// tokens, pieces "<0xHH>" byte pieces, the rest normal.
class Llama2cTokenizer final : public Tokenizer {
 public:
  /// Parses a llama2.c tokenizer file's bytes: int32 max_token_length, then per piece float32 score,
  /// int32 len, len bytes (no NUL). The vocabulary size is not in the file: it comes from the checkpoint.
  /// Errors: IoError naming `source` if the bytes end inside a piece ("tokenizer '...' is truncated in piece
  ///         i of vocab_size ..."), if bytes are left after vocab_size pieces ("... has N trailing bytes after
  ///         vocab_size pieces: written for a different vocabulary"), or if a piece length is negative or
  ///         exceeds max_token_length; ConfigError if vocab_size < 3 (BOS and EOS are ids 1 and 2).
  /// Source: llama2.c run.c `build_tokenizer`.
  static Llama2cTokenizer FromBytes(std::string_view bytes, int64_t vocab_size,
                                    const std::string& source = "<memory>");

  /// The bytes of a tokenizer file holding `pieces` (score, text) in order, max_token_length the longest text
  /// (at least 1): what FromBytes reads back. For writing test vocabularies and fuzz inputs.
  static std::string FileBytes(std::span<const std::pair<float, std::string>> pieces);

  /// Reads a tokenizer file. Errors: IoError if it is missing, not a regular file or unreadable (names the
  /// path); as FromBytes.
  static Llama2cTokenizer Load(const std::string& path, int64_t vocab_size);

  /// The number of pieces a tokenizer file holds when read to its end (the vocabulary size it was written
  /// for, if it is well formed).
  /// Errors: IoError naming `source` if max_token_length is not positive, a piece length is outside
  /// [0, max_token_length], the bytes end inside a piece, or there are fewer than 3 pieces.
  static int64_t CountPieces(std::string_view bytes, const std::string& source = "<memory>");

  // Encode(text, bos, eos) (the base class): llama2.c `encode`. Optional BOS; if `text` is non-empty, the id
  // of the piece " " (dummy prefix); each UTF-8 code point (a lead byte plus up to 3 continuation bytes)
  // becomes the id of the equal piece or, if there is none, one id per byte (byte + 3); then the adjacent
  // pair whose concatenated piece texts are a piece with the highest score is merged, leftmost on ties, until
  // no pair merges (pieces scored NaN or <= kLlama2cMinMergeScore never merge); optional EOS.
  // Complexity: O(n log n) in the byte length (heap of candidate merges ordered by (score desc, position asc),
  // entries invalidated lazily), identical in result to llama2.c's O(n^2) loop (EncodeReference).
  // Errors: ConfigError if text is non-empty and the vocabulary has no " " piece, or if a byte needs the
  // fallback id byte + 3 and that id is >= vocab_size.
  // Source: llama2.c run.c `encode`; text bytes are taken as they are (no UTF-8 validation, as run.c).

  /// The plain O(n^2) loop of llama2.c `encode` (no BOS/EOS): the reference Encode is checked against by the
  /// tests and the differential fuzzer. Same errors as Encode.
  std::vector<int> EncodeReference(std::string_view text) const;

  /// The bytes token `token` prints as after token `prev` (llama2.c `decode`): after BOS a leading space is
  /// dropped; a piece "<0xHH>" becomes the single byte HH.
  /// Errors: RangeError if token is outside [0, vocab_size).
  std::string DecodePiece(int prev, int token) const;

  /// Concatenated DecodePiece over ids (BOS itself prints nothing, as in llama2.c generation output).
  /// Errors: RangeError for an id outside [0, vocab_size).
  std::string Decode(std::span<const int> ids) const override;

  /// The Tokenizer interface (tokenizer.h); piece types as in the class comment. Errors: RangeError for an id
  /// outside [0, vocab_size).
  const std::string& Piece(int id) const override;
  TokenType Type(int id) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(pieces_.size()); }
  int bos_id() const override { return kBosId; }
  int eos_id() const override { return kEosId; }
  /// llama2.c's run.c encodes prompts with BOS.
  bool add_bos_default() const override { return true; }
  bool add_eos_default() const override { return false; }
  std::string Describe() const override;

  /// The file header's max_token_length (bytes).
  int max_token_length() const { return max_token_length_; }
  /// Merge score of piece `id`. Errors: RangeError if id is outside [0, vocab_size).
  float score(int id) const;
  /// Id of the piece equal to `text` (the first such id), or -1.
  int Lookup(std::string_view text) const;

 protected:
  std::vector<int> EncodeText(std::string_view text) const override;

 private:
  struct Merge {
    float score;  // score of the merged piece
    int id;       // merged piece id (the first id with that text)
  };
  void BuildIndex();
  /// Initial sequence: dummy prefix, then code points or byte fallback ids.
  std::vector<int> InitialIds(std::string_view text) const;
  /// The merge of adjacent tokens (left, right) as llama2.c finds it (by the concatenated piece texts), or
  /// false if there is none or its score does not pass kLlama2cMinMergeScore.
  bool FindMerge(int left, int right, Merge* merge) const;

  int max_token_length_ = 0;
  std::vector<std::string> pieces_;  // [vocab_size]
  std::vector<float> scores_;        // [vocab_size]
  std::vector<int> canonical_;       // [vocab_size]: Lookup(pieces_[id]) (the first id with the same text)
  std::unordered_map<std::string, int> lookup_;  // piece text -> first id with that text
  int byte_piece_[256];                          // single-byte piece ids (-1: none)
  int empty_piece_ = -1;                         // first id whose piece is "" (-1: none)
  std::unordered_map<uint64_t, Merge> merges_;   // (canonical left << 32 | canonical right) -> merge
};

}  // namespace posenc
