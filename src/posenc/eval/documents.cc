#include "posenc/eval/documents.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

std::vector<std::string_view> SplitDocuments(std::string_view text) {
  // Separator lines: occurrences starting a line and ending one (or the text).
  std::vector<size_t> seps;
  for (size_t at = text.find(kDocumentSeparator); at != std::string_view::npos;
       at = text.find(kDocumentSeparator, at + 1)) {
    const size_t end = at + kDocumentSeparator.size();
    const bool starts_line = at == 0 || text[at - 1] == '\n';
    const bool ends_line = end == text.size() || text[end] == '\n';
    if (starts_line && ends_line) seps.push_back(at);
  }
  if (seps.empty()) return {text};
  std::vector<std::string_view> docs;
  size_t prev = 0;
  auto add = [&](std::string_view piece) {
    if (!piece.empty() && piece.front() == '\n') piece.remove_prefix(1);
    if (!piece.empty() && piece.back() == '\n') piece.remove_suffix(1);
    docs.push_back(piece);
  };
  for (size_t at : seps) {
    add(text.substr(prev, at - prev));
    prev = at + kDocumentSeparator.size();
  }
  add(text.substr(prev));
  return docs;
}

TokenStream BuildTokenStream(std::string_view text, const Tokenizer& tokenizer) {
  TokenStream s;
  const std::vector<std::string_view> docs = SplitDocuments(text);
  s.n_documents = static_cast<int64_t>(docs.size());
  for (std::string_view d : docs) {
    const std::vector<int> ids = tokenizer.Encode(d, /*bos=*/true, /*eos=*/false);
    s.ids.insert(s.ids.end(), ids.begin(), ids.end());
  }
  return s;
}

std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open text file '{}'", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError(fmt::format("cannot read text file '{}'", path));
  return ss.str();
}

}  // namespace posenc
