#include "posenc/formats/json_reader.h"

#include <set>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/mapped_file.h"

namespace posenc {

nlohmann::json ParseJsonStrict(std::string_view text, const std::string& source, int max_depth) {
  using nlohmann::json;
  std::vector<std::set<std::string>> keys;  // one set per open object
  int open = 0;                             // objects and arrays currently open
  const json::parser_callback_t check = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        if (++open > max_depth) {
          throw IoError(fmt::format("{}: JSON nested {} deep exceeds the limit of {}", source, open, max_depth));
        }
        if (event == json::parse_event_t::object_start) keys.emplace_back();
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        --open;
        if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
        break;
      case json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
          throw IoError(fmt::format("{}: duplicate key '{}' in a JSON object", source, parsed.get<std::string>()));
        }
        break;
      case json::parse_event_t::value: break;
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), check);
  } catch (const json::exception& e) {
    throw IoError(fmt::format("{}: invalid JSON: {}", source, e.what()));
  }
}

nlohmann::json ReadJsonFile(const std::string& path, int max_depth) {
  const std::shared_ptr<const MappedFile> file = MappedFile::Open(path);
  const std::string_view text(reinterpret_cast<const char*>(file->data()), file->size());
  return ParseJsonStrict(text, path, max_depth);
}

}  // namespace posenc
