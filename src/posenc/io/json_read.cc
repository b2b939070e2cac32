#include "posenc/io/json_read.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/io/input_file.h"

namespace posenc {
namespace {

using nlohmann::json;

// Thrown from the parser callback; caught below and turned into an IoError with the position.
struct TooDeep {};

}  // namespace

json ParseJsonBounded(std::string_view text, std::string_view source, int max_depth) {
  // The callback sees every value with the number of enclosing containers; a container that starts at
  // depth d holds values at depth d + 1. Refusing at object_start / array_start stops the parse before the
  // over-deep container is built.
  const json::parser_callback_t limit = [max_depth](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth) {
      throw TooDeep{};
    }
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), limit);
  } catch (const TooDeep&) {
    // Locate the first container opened at depth max_depth + 1 (strings skipped) for the message.
    int depth = 0;
    bool in_string = false, escaped = false;
    size_t at = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      const char c = text[i];
      if (in_string) {
        if (escaped) {
          escaped = false;
        } else if (c == '\\') {
          escaped = true;
        } else if (c == '"') {
          in_string = false;
        }
      } else if (c == '"') {
        in_string = true;
      } else if (c == '[' || c == '{') {
        if (++depth > max_depth) {
          at = i;
          break;
        }
      } else if (c == ']' || c == '}') {
        --depth;
      }
    }
    throw IoError(fmt::format("{}: JSON nesting depth exceeds the limit of {} (arrays/objects inside each other) "
                              "at byte {}",
                              source, max_depth, at));
  } catch (const json::exception& e) {
    throw IoError(fmt::format("{} is not valid JSON: {}", source, e.what()));
  }
}

json LoadJsonFile(const std::string& path, std::string_view what, int max_depth) {
  const std::string text = ReadRegularFile(path, what);
  return ParseJsonBounded(text, fmt::format("{} '{}'", what, path), max_depth);
}

std::string JsonSnippet(const json& value, std::size_t max_chars) {
  std::string text;
  if (value.is_string() && value.get_ref<const std::string&>().size() > max_chars) {
    const std::string& s = value.get_ref<const std::string&>();
    text = json(s.substr(0, max_chars)).dump(-1, ' ', false, json::error_handler_t::replace);
    return fmt::format("{}... ({} bytes)", text.substr(0, max_chars), s.size());
  }
  text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= max_chars) return text;
  return fmt::format("{}... ({} bytes)", text.substr(0, max_chars), text.size());
}

}  // namespace posenc
