// Helpers for the model / eval tests: the bundled llama2.c model, tokenizer and texts (repo data/).
#pragma once

#include <string>
#include <vector>

#include "posenc/eval/documents.h"
#include "posenc/formats/llama2c.h"
#include "posenc/tokenizer/llama2c.h"
#include "posenc/model/transformer.h"

namespace posenc::testing {

inline std::string DataPath(const std::string& relative) { return std::string(POSENC_DATA_DIR) + "/" + relative; }
inline std::string ModelPath() { return DataPath("stories260K.bin"); }
inline std::string TokenizerPath() { return DataPath("tok512.bin"); }
inline std::string TextPath(const std::string& name) { return DataPath("text/" + name); }

/// The bundled stories260K model (loaded once per test binary).
inline const Transformer& Stories260K() {
  static const Transformer model = Transformer::Load(ModelPath());
  return model;
}

/// The bundled tok512 tokenizer (loaded once).
inline const Llama2cTokenizer& Tok512() {
  static const Llama2cTokenizer tok = Llama2cTokenizer::Load(TokenizerPath(), 512);
  return tok;
}

/// Token stream of a bundled text (protocol step 1).
inline std::vector<int> StreamOf(const std::string& text_name) {
  return BuildTokenStream(ReadTextFile(TextPath(text_name)), Tok512()).ids;
}

}  // namespace posenc::testing
