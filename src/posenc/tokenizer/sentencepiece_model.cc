#include "posenc/tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {

SentencePieceTokenizer::SentencePieceTokenizer() : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::FromBytes(std::string_view bytes,
                                                                          const std::string& source) {
  std::unique_ptr<SentencePieceTokenizer> t(new SentencePieceTokenizer());
  t->source_ = source;
  const sentencepiece::util::Status status = t->sp_->LoadFromSerializedProto(bytes);
  if (!status.ok()) {
    throw ConfigError(fmt::format("'{}' is not a sentencepiece model: {}", source, status.ToString()));
  }
  if (t->sp_->GetPieceSize() <= 0) throw ConfigError(fmt::format("sentencepiece model '{}' has no pieces", source));
  return t;
}

std::vector<int> SentencePieceTokenizer::EncodeText(std::string_view text) const {
  const size_t valid = ValidUtf8Prefix(text);
  if (valid != text.size()) {
    throw ConfigError(fmt::format("text is not valid UTF-8 at byte offset {} (byte 0x{:02X}): the sentencepiece "
                                  "library would replace it by U+FFFD; tokenizer '{}'",
                                  valid, static_cast<unsigned char>(text[valid]), source_));
  }
  std::vector<int> ids;
  const sentencepiece::util::Status status = sp_->Encode(text, &ids);
  if (!status.ok()) throw ConfigError(fmt::format("sentencepiece '{}' failed to encode: {}", source_, status.ToString()));
  return ids;
}

std::string SentencePieceTokenizer::Decode(std::span<const int> ids) const {
  CheckTokenIds(ids, vocab_size());
  std::string text;
  const sentencepiece::util::Status status = sp_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
  if (!status.ok()) throw ConfigError(fmt::format("sentencepiece '{}' failed to decode: {}", source_, status.ToString()));
  return text;
}

const std::string& SentencePieceTokenizer::Piece(int id) const {
  CheckTokenId(id, vocab_size());
  return sp_->IdToPiece(id);
}

TokenType SentencePieceTokenizer::Type(int id) const {
  CheckTokenId(id, vocab_size());
  if (sp_->IsControl(id)) return TokenType::kControl;
  if (sp_->IsUnknown(id)) return TokenType::kUnknown;
  if (sp_->IsUnused(id)) return TokenType::kUnused;
  if (sp_->IsByte(id)) return TokenType::kByte;
  return TokenType::kNormal;
}

int64_t SentencePieceTokenizer::vocab_size() const { return sp_->GetPieceSize(); }
int SentencePieceTokenizer::bos_id() const { return sp_->bos_id(); }
int SentencePieceTokenizer::eos_id() const { return sp_->eos_id(); }

void SentencePieceTokenizer::SetAddFlags(bool add_bos, bool add_eos, const std::string& source) {
  if (add_bos && bos_id() < 0) throw ConfigError(fmt::format("{}: add_bos_token is true but the model has no BOS", source));
  if (add_eos && eos_id() < 0) throw ConfigError(fmt::format("{}: add_eos_token is true but the model has no EOS", source));
  add_bos_ = add_bos;
  add_eos_ = add_eos;
}

std::string SentencePieceTokenizer::Describe() const {
  return fmt::format("sentencepiece model ({}), {} tokens", source_, vocab_size());
}

}  // namespace posenc
