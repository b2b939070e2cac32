#include "posenc/tokenizer/tokenize.h"

#include <iostream>
#include <iterator>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/mapped_file.h"
#include "posenc/tokenizer/load.h"

namespace posenc {

AddBos ParseAddBos(const std::string& value) {
  if (value == "auto") return AddBos::kAuto;
  if (value == "yes") return AddBos::kYes;
  if (value == "no") return AddBos::kNo;
  throw ConfigError(fmt::format("--add-bos must be auto, yes or no, got '{}'", value));
}

TokenizeResult Tokenize(const TokenizeOptions& options) {
  const std::unique_ptr<Tokenizer> tokenizer = LoadModelTokenizer(options.model_path, options.tokenizer_path);
  std::string text;
  if (options.text_path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) throw IoError("cannot read the text from standard input");
  } else {
    const std::shared_ptr<const MappedFile> file = MappedFile::Open(options.text_path);
    text.assign(reinterpret_cast<const char*>(file->data()), file->size());
  }
  const bool bos = options.add_bos == AddBos::kYes ||
                   (options.add_bos == AddBos::kAuto && tokenizer->add_bos_default());
  TokenizeResult r;
  r.ids = tokenizer->Encode(text, bos);
  r.pieces.reserve(r.ids.size());
  for (int id : r.ids) r.pieces.push_back(tokenizer->Piece(id));
  r.tokenizer = tokenizer->Describe();
  return r;
}

}  // namespace posenc
