// Hugging Face / Meta `tokenizer.model` files (a serialized sentencepiece ModelProto), through the sentencepiece
// library itself.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace posenc {

/// A sentencepiece model (BPE or Unigram, with its own normalizer and dummy-prefix rule) used through
/// `sentencepiece::SentencePieceProcessor`: Encode and Decode are the library's own, so its ids are exactly
/// sentencepiece's. Piece types come from the library (IsControl / IsUnknown / IsUnused / IsByte; the library
/// does not expose user-defined pieces, which report kNormal).
///
/// Invalid UTF-8: sentencepiece replaces such bytes by U+FFFD before encoding (the byte would be lost), so
/// Encode rejects a text that is not valid UTF-8 with a ConfigError naming the byte offset; the GGUF path of the
/// same vocabulary (SpmTokenizer) keeps such bytes through byte fallback.
/// add_bos_default is true (sentencepiece's Llama convention, and tokenizer_config.json's default for
/// LlamaTokenizer), add_eos_default false, unless the folder's tokenizer_config.json says otherwise
/// (SetAddFlags).
class SentencePieceTokenizer final : public Tokenizer {
 public:
  /// Parses a serialized ModelProto. `source` names it in messages.
  /// Errors: ConfigError naming `source` and sentencepiece's message if the bytes are not a valid model.
  static std::unique_ptr<SentencePieceTokenizer> FromBytes(std::string_view bytes, const std::string& source);

  ~SentencePieceTokenizer() override;

  /// The Tokenizer interface (tokenizer.h), with the sentencepiece library's Decode. Errors:
  /// RangeError for an id outside [0, vocab_size).
  std::string Decode(std::span<const int> ids) const override;
  const std::string& Piece(int id) const override;
  TokenType Type(int id) const override;
  int64_t vocab_size() const override;
  int bos_id() const override;
  int eos_id() const override;
  bool add_bos_default() const override { return add_bos_; }
  bool add_eos_default() const override { return add_eos_; }
  /// tokenizer_config.json's add_bos_token / add_eos_token (what transformers' LlamaTokenizer honours).
  /// Errors: ConfigError naming `source` if a flag asks for a token the model does not have.
  void SetAddFlags(bool add_bos, bool add_eos, const std::string& source);
  std::string Describe() const override;

 protected:
  /// Errors: ConfigError if the text is not valid UTF-8 (names the offset) or sentencepiece reports an error.
  std::vector<int> EncodeText(std::string_view text) const override;

 private:
  SentencePieceTokenizer();
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::string source_;
  bool add_bos_ = true;
  bool add_eos_ = false;
};

}  // namespace posenc
