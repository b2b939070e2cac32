// Strict JSON parsing for files read from disk (config.json, safetensors headers, shard indexes).
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace posenc {

/// Deepest nesting of objects/arrays accepted in a model file's JSON (a safetensors header is depth 3).
inline constexpr int kMaxJsonDepth = 64;

/// Parses JSON text, refusing what nlohmann-json would accept silently: duplicate keys in an object (it keeps the
/// last) and nesting deeper than max_depth.
///
/// Errors: IoError naming `source` (the file, or "file: field") and the problem: invalid JSON (with the parser's
///         byte position), a duplicate key (named), nesting deeper than max_depth (depth and limit).
nlohmann::json ParseJsonStrict(std::string_view text, const std::string& source, int max_depth = kMaxJsonDepth);

/// Reads a JSON file (a regular file, checked as MappedFile::Open does) and parses it with ParseJsonStrict.
nlohmann::json ReadJsonFile(const std::string& path, int max_depth = kMaxJsonDepth);

}  // namespace posenc
