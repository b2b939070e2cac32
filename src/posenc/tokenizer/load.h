// One entry point that loads a tokenizer from whatever the user has: a GGUF, a Hugging Face directory, or a
// tokenizer file alone.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// What a path holds, as LoadTokenizer decides it.
enum class TokenizerSource {
  kGguf,            // GGUF file (magic "GGUF"): its tokenizer.ggml.* metadata (vocab-only or full model)
  kHfDirectory,     // a directory: its tokenizer.json, else its tokenizer.model
  kTokenizerJson,   // a Hugging Face tokenizer.json (first non-space byte '{')
  kSentencePiece,   // a sentencepiece tokenizer.model (name ending in ".model", or any other file that is not
                    // one of the rest)
  kLlama2c,         // a llama2.c tokenizer .bin (name ending in ".bin")
};

/// "GGUF", "Hugging Face directory", "tokenizer.json", "sentencepiece tokenizer.model", "llama2.c tokenizer".
const char* TokenizerSourceName(TokenizerSource source);

/// Options of LoadTokenizer.
struct TokenizerLoadOptions {
  /// Vocabulary size of a llama2.c tokenizer .bin (the file does not store it; the llama2.c checkpoint's
  /// header does). 0: count the pieces until the file ends (exact for a well-formed file, but a file written
  /// for another vocabulary size cannot be told apart).
  int64_t llama2c_vocab_size = 0;
  /// Match the special tokens written in the text (Tokenizer::set_parse_special).
  bool parse_special = false;
};

/// Decides what `path` holds. Directories are kHfDirectory; a regular file is recognised by its first bytes
/// (GGUF magic, JSON '{'), then by its name (".bin" llama2.c, otherwise sentencepiece).
/// Errors: IoError naming the path if it does not exist, cannot be read, or is neither a regular file nor a
/// directory (a FIFO or device is refused before it is opened, so nothing blocks).
TokenizerSource DetectTokenizerSource(const std::string& path);

/// Loads the tokenizer at `path` (see TokenizerSource). In a Hugging Face directory, tokenizer.json is used
/// when present (with tokenizer_config.json beside it), else tokenizer.model; a tokenizer.json that is refused
/// (a SentencePiece-style file, a normalizer posenc lacks) with a tokenizer.model beside it gives the latter,
/// and the refusal becomes one of the tokenizer's notes(). A tokenizer.json alone also reads a
/// tokenizer_config.json in its directory.
/// Errors: IoError (unreadable, not a regular file, a directory with neither file), ConfigError (what each
/// family's loader rejects; in a directory whose two files are both refused, both reasons), each naming the
/// path.
std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path, const TokenizerLoadOptions& options = {});

/// The tokenizer that goes with a model: `tokenizer_path` if non-empty, else the model's own (a GGUF's
/// metadata, a Hugging Face directory's tokenizer files, or model_path itself when it is a tokenizer file).
/// A llama2.c tokenizer .bin takes its vocabulary size from the llama2.c checkpoint at model_path when that
/// is one (otherwise it is counted, see TokenizerLoadOptions).
/// Errors: as LoadTokenizer; ConfigError if model_path is a llama2.c checkpoint and no tokenizer_path is
/// given ("holds no vocabulary"); the checkpoint header's errors (ParseCheckpointHeader).
/// parse_special: as TokenizerLoadOptions.
std::unique_ptr<Tokenizer> LoadModelTokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                              bool parse_special = false);

}  // namespace posenc
