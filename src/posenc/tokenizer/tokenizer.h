// The one tokenizer interface the model, eval and CLI use, whatever the vocabulary family (llama2.c .bin,
// SentencePiece-style BPE from GGUF or tokenizer.model, byte-level BPE from GGUF or tokenizer.json).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer/added_tokens.h"

namespace posenc {

/// Token types, numbered as GGUF `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`), which follows
/// sentencepiece's `ModelProto.SentencePiece.Type` (NORMAL 1, UNKNOWN 2, CONTROL 3, USER_DEFINED 4, UNUSED 5,
/// BYTE 6). 0 is "undefined" in GGUF; readers map it to kNormal.
enum class TokenType : int32_t {
  kNormal = 1,       // an ordinary piece, produced by merges
  kUnknown = 2,      // the unknown token (<unk>)
  kControl = 3,      // BOS, EOS, padding, chat markers: never produced from text, decoded to nothing
  kUserDefined = 4,  // matched whole in the text before any merge (HF "added tokens" that are not special)
  kUnused = 5,       // reserved, never produced
  kByte = 6,         // SentencePiece byte-fallback piece "<0xXX>"
};

/// "normal", "unknown", "control", "user_defined", "unused", "byte".
const char* TokenTypeName(TokenType type);

/// A tokenizer: text bytes <-> token ids [0, vocab_size).
///
/// Encode is const and thread-safe (documents are encoded in parallel). Every byte of the text reaches some
/// token: through a piece, a byte-fallback piece, the byte-level map, or (when a vocabulary has none of these
/// for a byte) the unknown token; a vocabulary that has no way to represent a byte is an error, never a silent
/// drop. By default control tokens (BOS, EOS, chat markers) are not matched in the text: "<s>" in the text is
/// tokenized as the characters '<', 's', '>' (llama.cpp's `parse_special = false`, as `llama-perplexity`
/// tokenizes; sentencepiece's behaviour). set_parse_special(true) matches them (Hugging Face's `tokenizer(text)`).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Token ids of `text`: [bos_id()] if add_bos, then the text's tokens, then [eos_id()] if add_eos. Under
  /// parse_special the text is first cut at the special tokens (SpecialTokens, leftmost-longest, with their
  /// lstrip / rstrip); each one gives its id and each run between them is encoded as a text of its own (so a
  /// SentencePiece dummy prefix begins every run, as llama.cpp's `tokenize` with parse_special).
  /// Complexity: O(n log n) in the text's byte length for every family.
  /// Errors: ConfigError if add_bos (add_eos) and the vocabulary has no BOS (EOS) token; as EncodeText.
  std::vector<int> Encode(std::string_view text, bool add_bos, bool add_eos = false) const;

  /// Whether Encode matches the special tokens written in the text (default false). Set it before Encode is
  /// called from several threads; it is not synchronized with them.
  /// Errors: ConfigError naming the id if a special token's text is empty (none is matched then).
  void set_parse_special(bool on);
  bool parse_special() const { return special_ != nullptr; }

  /// The tokens parse_special matches: by default every control and unknown token with a non-empty piece
  /// (llama.cpp's `tokenizer_st_partition` with parse_special: CONTROL and UNKNOWN attributes), each with its
  /// piece as content and no stripping; a family that knows more (Hugging Face special added tokens with
  /// lstrip / rstrip) gives those.
  virtual std::vector<AddedToken> SpecialTokens() const;

  /// What the reader noted while loading (a default it applied, a file it fell back to), one line each, for
  /// the command to print; empty for most vocabularies.
  const std::vector<std::string>& notes() const { return notes_; }
  void AddNote(std::string note) { notes_.push_back(std::move(note)); }

  /// The bytes of `ids` concatenated, as the family's decoder gives them (byte pieces become their byte, the
  /// byte-level map is inverted, SentencePiece's "▁" becomes a space and the dummy-prefix space of the first
  /// piece is dropped); control tokens give nothing. Decode(Encode(text, ...)) == text for every text the
  /// family represents losslessly (any valid UTF-8 for the families here; see each family for invalid UTF-8).
  /// Errors: RangeError naming the position and the id if an id is outside [0, vocab_size()).
  virtual std::string Decode(std::span<const int> ids) const = 0;

  /// The vocabulary's text of token `id` as stored (SentencePiece "▁the", byte-level "Ġthe", "<0x0A>", "<s>").
  /// Errors: RangeError if id is outside [0, vocab_size()).
  virtual const std::string& Piece(int id) const = 0;

  /// The type of token `id`. Errors: RangeError if id is outside [0, vocab_size()).
  virtual TokenType Type(int id) const = 0;

  /// Number of token ids: every id Encode returns is in [0, vocab_size()).
  virtual int64_t vocab_size() const = 0;
  /// BOS / EOS token ids, -1 if the vocabulary has none.
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  /// Whether the vocabulary asks for BOS at the start of a sequence (GGUF `tokenizer.ggml.add_bos_token`,
  /// tokenizer_config.json `add_bos_token`, the family's default otherwise).
  virtual bool add_bos_default() const = 0;
  /// Whether the vocabulary asks for EOS at the end (GGUF `tokenizer.ggml.add_eos_token`, ...).
  virtual bool add_eos_default() const = 0;
  /// A one-line description: family, source format and vocabulary size, e.g.
  /// "SentencePiece BPE (GGUF tokenizer.ggml.model=llama), 32000 tokens".
  virtual std::string Describe() const = 0;

 protected:
  /// The tokens of `text` without BOS / EOS. Errors: as documented by each family.
  virtual std::vector<int> EncodeText(std::string_view text) const = 0;

 private:
  std::shared_ptr<const AddedTokenMatcher> special_;  // null: parse_special off
  std::vector<std::string> notes_;
};

/// The byte a SentencePiece byte-fallback piece stands for: "<0xHH>" (hex digits in either case) -> HH, any
/// other text -> -1. Source: sentencepiece's byte pieces; llama2.c `decode` parses the same form.
int BytePieceValue(std::string_view piece);

/// Checks that id is in [0, vocab_size). Errors: RangeError "token id must be in [0, vocab_size=V), got ID".
void CheckTokenId(int64_t id, int64_t vocab_size);

/// Checks every id of a sequence. Errors: RangeError "token id at position P must be in [0, vocab_size=V),
/// got ID" for the first bad one.
void CheckTokenIds(std::span<const int> ids, int64_t vocab_size);

}  // namespace posenc
