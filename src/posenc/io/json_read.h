// Bounded JSON reading: every JSON document posenc reads (HF config.json, tokenizer.json, ...) goes through
// ParseJsonBounded, so that no input can make a reader, a copy or a dump recurse deeper than kMaxJsonDepth.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace posenc {

/// Deepest nesting of arrays and objects accepted in a JSON document (the top-level value is depth 1).
/// Real configs nest 3-4 levels and tokenizer.json files about 6; nlohmann-json copies, compares and dumps
/// values recursively, so an unbounded depth is a stack overflow waiting for a hostile file.
inline constexpr int kMaxJsonDepth = 64;

/// Parses `text` as one JSON document, refusing it as soon as arrays/objects nest deeper than max_depth.
///
/// The depth is counted by the parser itself (nlohmann-json's parser is iterative; its callback reports the
/// depth of every value), so nothing recursive runs on an over-deep input.
/// Errors:  IoError "<source> is not valid JSON: ..." for a syntax error; IoError "<source>: JSON nesting
///          depth exceeds the limit of 64 (arrays/objects inside each other) at byte N" for a deeper document.
/// Source:  RFC 8259 (JSON); depth limits as in RFC 8259 Sec. 9 ("An implementation may set limits on the
///          maximum depth of nesting").
nlohmann::json ParseJsonBounded(std::string_view text, std::string_view source, int max_depth = kMaxJsonDepth);

/// Reads a whole JSON file (a regular file: ReadRegularFile) and parses it with ParseJsonBounded.
/// `what` names the file's role in messages ("config file", "tokenizer.json").
/// Errors: as ReadRegularFile and ParseJsonBounded.
nlohmann::json LoadJsonFile(const std::string& path, std::string_view what, int max_depth = kMaxJsonDepth);

/// `value` as compact JSON text for an error message or a note, cut to at most max_chars characters:
/// a longer dump ends in "... (N bytes)". Strings are cut before they are dumped, so a 100 MB string costs
/// no 100 MB copy. The value's depth must be bounded (ParseJsonBounded guarantees it).
std::string JsonSnippet(const nlohmann::json& value, std::size_t max_chars = 80);

}  // namespace posenc
