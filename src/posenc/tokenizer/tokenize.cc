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
  throw ConfigError(fmt::format("`add_bos` must be auto, yes or no, got '{}'", value));
}

std::optional<bool> ParseAddBosChoice(const std::string& value) {
  switch (ParseAddBos(value)) {
    case AddBos::kYes: return true;
    case AddBos::kNo: return false;
    case AddBos::kAuto: break;
  }
  return std::nullopt;
}

std::vector<TokenizeResult> Tokenize(const TokenizeOptions& options) {
  if (options.text_paths.empty()) throw ConfigError("no text to tokenize: give a text file or \"-\" for stdin");
  // Every file is mapped (and so checked) before the tokenizer loads; standard input is read when its turn comes.
  std::vector<std::shared_ptr<const MappedFile>> files;
  for (const std::string& path : options.text_paths) files.push_back(path == "-" ? nullptr : MappedFile::Open(path));
  const std::unique_ptr<Tokenizer> tokenizer =
      LoadModelTokenizer(options.model_path, options.tokenizer_path, options.parse_special);
  if (options.on_note) {
    for (const std::string& note : tokenizer->notes()) options.on_note(note);
  }
  const bool bos = options.add_bos == AddBos::kYes ||
                   (options.add_bos == AddBos::kAuto && tokenizer->add_bos_default());
  std::vector<TokenizeResult> results;
  for (size_t i = 0; i < files.size(); ++i) {
    std::string stdin_text;
    if (files[i] == nullptr) {
      stdin_text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
      if (std::cin.bad()) throw IoError("cannot read the text from standard input");
    }
    const std::string_view text =
        files[i] ? std::string_view(reinterpret_cast<const char*>(files[i]->data()), files[i]->size()) : stdin_text;
    TokenizeResult& r = results.emplace_back();
    r.text_path = options.text_paths[i];
    r.ids = tokenizer->Encode(text, bos);
    r.pieces.reserve(r.ids.size());
    for (int id : r.ids) r.pieces.push_back(tokenizer->Piece(id));
  }
  return results;
}

}  // namespace posenc
