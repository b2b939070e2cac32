// `posenc tokenize`: a text's token ids and pieces under a model's tokenizer.
#pragma once

#include <functional>
#include <optional>
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

/// The choice as the eval and passkey options hold it: unset for kAuto, else true or false.
/// Errors: as ParseAddBos.
std::optional<bool> ParseAddBosChoice(const std::string& value);

/// What Tokenize reads.
struct TokenizeOptions {
  std::string model_path;      // GGUF, Hugging Face directory, tokenizer file, or llama2.c checkpoint
  std::string tokenizer_path;  // optional: a tokenizer file that overrides the model's own
  std::vector<std::string> text_paths = {"-"};  // the texts, each encoded alone; "-" reads standard input
  AddBos add_bos = AddBos::kAuto;
  bool parse_special = false;  // match special tokens written in the text (Tokenizer::set_parse_special)
  std::function<void(const std::string& note)> on_note;  // if set, called with each of the tokenizer's notes
};

/// Token ids of one whole text (one Encode call: the text is not split into documents), with their pieces.
struct TokenizeResult {
  std::string text_path;
  std::vector<int> ids;              // [n_tokens]
  std::vector<std::string> pieces;   // [n_tokens] Tokenizer::Piece of each id
};

/// Loads the tokenizer once (LoadModelTokenizer), then reads and encodes each text in order; EOS is never
/// added. Returns one result per text path.
/// Errors: as LoadModelTokenizer and Tokenizer::Encode; IoError naming the path if a text cannot be read
/// (every path is checked before the tokenizer is loaded); ConfigError if text_paths is empty.
std::vector<TokenizeResult> Tokenize(const TokenizeOptions& options);

}  // namespace posenc
