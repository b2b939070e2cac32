#include "posenc/tokenizer/normalize.h"

#include <cstdlib>
#include <memory>

#include <utf8proc.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {
namespace {

// Appends the NFC form of a run of valid UTF-8.
void AppendNfc(std::string_view run, std::string& out) {
  bool ascii = true;
  for (const char c : run) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) {
    out.append(run);
    return;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()), static_cast<utf8proc_ssize_t>(run.size()),
                   &mapped, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(mapped, &std::free);
  if (n < 0) {
    // The run was checked to be valid UTF-8, so only an allocation failure is left.
    throw Error(std::string("NFC normalization of a text run of ") + std::to_string(run.size()) +
                " bytes failed: " + utf8proc_errmsg(n));
  }
  out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
}

}  // namespace

std::string NormalizeNfc(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    while (end < text.size()) {
      const size_t n = ValidUtf8Length(text, end);
      if (n == 0) break;
      end += n;
    }
    if (end > pos) AppendNfc(text.substr(pos, end - pos), out);
    if (end < text.size()) out.push_back(text[end++]);  // an invalid byte, kept in place
    pos = end;
  }
  return out;
}

}  // namespace posenc
