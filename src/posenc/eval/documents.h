// Eval protocol step 1: text -> documents -> token stream (the numpy oracle ref_llama2c.py, its docstring).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// The document separator line.
inline constexpr std::string_view kDocumentSeparator = "<|endoftext|>";

/// Splits a text into documents. If some line is exactly "<|endoftext|>" (a line is the text between "\n"s;
/// nothing else on it, not even "\r"), the text is cut at every such line and the separators dropped; then
/// each piece loses ONE leading "\n" and ONE trailing "\n" if present. Every piece is a document, including
/// empty ones. Otherwise the whole text, unchanged, is one document.
/// Shapes: returns views into `text` in file order (at least one).
/// Source: ref_llama2c.py `split_documents` (protocol step 1).
std::vector<std::string_view> SplitDocuments(std::string_view text);

/// The token stream of a text and how many documents it had.
struct TokenStream {
  std::vector<int> ids;     // [stream_length]: concatenation of [BOS] + encode(document)
  int64_t n_documents = 0;
};

/// [BOS] + tokenizer.Encode(document) for every document of SplitDocuments(text), concatenated; the BOS only
/// when `add_bos` (default: the vocabulary's own rule, add_bos_default(): a Qwen2.5 folder whose bos_token is null
/// adds none, as transformers' tokenizer(text) does).
/// Threads: documents are encoded in parallel (OpenMP); the stream does not depend on the thread count.
/// Errors: as Tokenizer::Encode (the first one thrown; ConfigError for add_bos without a BOS token).
/// Source: ref_llama2c.py `token_stream`.
TokenStream BuildTokenStream(std::string_view text, const Tokenizer& tokenizer,
                             std::optional<bool> add_bos = std::nullopt);

/// Tokenizer.Encode(doc, add_bos, no EOS) of every document, in parallel (OpenMP); the result does not depend on
/// the thread count. Errors: as Tokenizer::Encode (the first one thrown).
std::vector<std::vector<int>> EncodeDocuments(std::span<const std::string_view> docs, const Tokenizer& tokenizer,
                                              bool add_bos);

/// Reads a whole file as bytes (no newline translation).
/// Errors: IoError naming the path if it cannot be opened or read.
std::string ReadTextFile(const std::string& path);

}  // namespace posenc
