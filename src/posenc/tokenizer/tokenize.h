// `posenc tokenize`: a text's token ids and pieces under a model's tokenizer.
#pragma once

#include <string>
#include <vector>

namespace posenc {

/// Whether Tokenize starts the ids with BOS.
enum class AddBos {
  kAuto,  // as the vocabulary asks (Tokenizer::add_bos_default)
  kYes,
  kNo,
};

/// Parses "auto", "yes", "no". Errors: ConfigError naming the value.
AddBos ParseAddBos(const std::string& value);

/// What Tokenize reads.
struct TokenizeOptions {
  std::string model_path;      // GGUF, Hugging Face directory, tokenizer file, or llama2.c checkpoint
  std::string tokenizer_path;  // optional: a tokenizer file that overrides the model's own
  std::string text_path = "-";  // the text; "-" reads standard input to its end
  AddBos add_bos = AddBos::kAuto;
};

/// Token ids of the whole text (one Encode call: the text is not split into documents), with their pieces.
struct TokenizeResult {
  std::vector<int> ids;              // [n_tokens]
  std::vector<std::string> pieces;   // [n_tokens] Tokenizer::Piece of each id
  std::string tokenizer;             // Tokenizer::Describe
};

/// Loads the tokenizer (LoadModelTokenizer), reads the text and encodes it; EOS is never added.
/// Errors: as LoadModelTokenizer and Tokenizer::Encode; IoError if the text cannot be read.
TokenizeResult Tokenize(const TokenizeOptions& options);

}  // namespace posenc
