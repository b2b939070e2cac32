#include "posenc/eval/documents.h"

#include <exception>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/io/input_file.h"

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

TokenStream BuildTokenStream(std::string_view text, const Tokenizer& tokenizer, std::optional<bool> add_bos) {
  TokenStream s;
  const std::vector<std::string_view> docs = SplitDocuments(text);
  s.n_documents = static_cast<int64_t>(docs.size());
  // Documents are encoded independently (Encode is const), in parallel, then joined in document order.
  const std::vector<std::vector<int>> ids = EncodeDocuments(docs, tokenizer, add_bos.value_or(tokenizer.add_bos_default()));
  size_t total = 0;
  for (const std::vector<int>& d : ids) total += d.size();
  s.ids.reserve(total);
  for (const std::vector<int>& d : ids) s.ids.insert(s.ids.end(), d.begin(), d.end());
  return s;
}

std::vector<std::vector<int>> EncodeDocuments(std::span<const std::string_view> docs, const Tokenizer& tokenizer,
                                              bool add_bos) {
  std::vector<std::vector<int>> ids(docs.size());
  std::exception_ptr error;
  std::mutex mu;
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < static_cast<int64_t>(docs.size()); ++i) {
    try {
      ids[static_cast<size_t>(i)] = tokenizer.Encode(docs[static_cast<size_t>(i)], add_bos, /*add_eos=*/false);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
  return ids;
}

std::string ReadTextFile(const std::string& path) { return ReadRegularFile(path, "text file"); }

}  // namespace posenc
