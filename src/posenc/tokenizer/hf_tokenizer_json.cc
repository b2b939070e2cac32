#include "posenc/tokenizer/hf_tokenizer_json.h"

#include <limits>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/io/json_read.h"

namespace posenc {
namespace {

using nlohmann::json;

// Typed access with messages naming the file and the field.
class Fields {
 public:
  explicit Fields(const std::string& source) : source_(source) {}

  const json& Object(const json& parent, const char* key, const std::string& where) const {
    const json& v = Member(parent, key, where);
    if (!v.is_object()) throw Bad(where + "." + key, "an object", v);
    return v;
  }
  std::string String(const json& v, const std::string& where) const {
    if (!v.is_string()) throw Bad(where, "a string", v);
    return v.get<std::string>();
  }
  bool Bool(const json& parent, const char* key, bool fallback, const std::string& where) const {
    const auto it = parent.find(key);
    if (it == parent.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) throw Bad(where + "." + key, "true or false", *it);
    return it->get<bool>();
  }
  int Id(const json& v, const std::string& where) const {
    if (!v.is_number_integer()) throw Bad(where, "an integer token id", v);
    const int64_t id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max() / 2) throw Bad(where, "a token id in [0, 2^30)", v);
    return static_cast<int>(id);
  }
  const json& Member(const json& parent, const char* key, const std::string& where) const {
    const auto it = parent.find(key);
    if (it == parent.end()) throw ConfigError(fmt::format("'{}': {}.{} is missing", source_, where, key));
    return *it;
  }
  ConfigError Bad(const std::string& field, const char* expected, const json& got) const {
    std::string shown = got.dump();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";
    return ConfigError(fmt::format("'{}': {} must be {}, got {}", source_, field, expected, shown));
  }
  ConfigError Unsupported(const std::string& what) const {
    return ConfigError(fmt::format("'{}': {} is not supported", source_, what));
  }

 private:
  const std::string& source_;
};

std::string EscapeLiteral(const std::string& s) {
  std::string out;
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

SplitBehavior ParseBehavior(const Fields& f, const json& v, const std::string& where) {
  const std::string b = f.String(v, where);
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  throw f.Bad(where, "Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous", v);
}

// Appends the steps of one pre_tokenizer object; counts ByteLevel steps.
void AddPreTokenizer(const Fields& f, const json& p, const std::string& where, std::vector<PreTokenizerStep>& steps,
                     int& byte_level) {
  if (!p.is_object()) throw f.Bad(where, "an object", p);
  const std::string type = f.String(f.Member(p, "type", where), where + ".type");
  PreTokenizerStep s;
  if (type == "Sequence") {
    const json& list = f.Member(p, "pretokenizers", where);
    if (!list.is_array()) throw f.Bad(where + ".pretokenizers", "an array", list);
    for (size_t i = 0; i < list.size(); ++i) {
      AddPreTokenizer(f, list[i], fmt::format("{}.pretokenizers[{}]", where, i), steps, byte_level);
    }
  } else if (type == "ByteLevel") {
    if (f.Bool(p, "add_prefix_space", true, where)) {
      s.kind = PreTokenizerStep::Kind::kPrefixSpace;
      steps.push_back(s);
    }
    if (f.Bool(p, "use_regex", true, where)) {
      PreTokenizerStep split;
      split.pattern = kGpt2Pattern;
      steps.push_back(split);
    }
    PreTokenizerStep map;
    map.kind = PreTokenizerStep::Kind::kByteLevel;
    steps.push_back(map);
    ++byte_level;
  } else if (type == "Split") {
    const json& pattern = f.Object(p, "pattern", where);
    if (pattern.contains("Regex")) {
      s.pattern = f.String(pattern["Regex"], where + ".pattern.Regex");
    } else if (pattern.contains("String")) {
      s.pattern = EscapeLiteral(f.String(pattern["String"], where + ".pattern.String"));
    } else {
      throw f.Bad(where + ".pattern", "{\"Regex\": ...} or {\"String\": ...}", pattern);
    }
    s.behavior = ParseBehavior(f, f.Member(p, "behavior", where), where + ".behavior");
    s.invert = f.Bool(p, "invert", false, where);
    steps.push_back(s);
  } else if (type == "Digits") {
    s.pattern = f.Bool(p, "individual_digits", false, where) ? R"(\p{N})" : R"(\p{N}+)";
    steps.push_back(s);
  } else if (type == "Punctuation") {
    // Rust char::is_ascii_punctuation or a Unicode punctuation category (tokenizers' `is_punc`).
    s.pattern = R"([\p{P}!-/:-@\[-`{-~])";
    const auto it = p.find("behavior");
    s.behavior = it == p.end() ? SplitBehavior::kIsolated : ParseBehavior(f, *it, where + ".behavior");
    steps.push_back(s);
  } else if (type == "Whitespace") {
    s.pattern = R"(\w+|[^\w\s]+)";  // the words kept; the rest (whitespace) removed
    s.behavior = SplitBehavior::kRemoved;
    s.invert = true;
    steps.push_back(s);
  } else if (type == "WhitespaceSplit") {
    s.pattern = R"(\s+)";
    s.behavior = SplitBehavior::kRemoved;
    steps.push_back(s);
  } else if (type == "Metaspace") {
    throw f.Unsupported(where + " Metaspace (a SentencePiece-style tokenizer.json: use its tokenizer.model)");
  } else {
    throw f.Unsupported(fmt::format("{} type '{}'", where, type));
  }
}

// BOS / EOS from a TemplateProcessing post-processor: a special token first / last in "single".
void ReadTemplate(const Fields& f, const json& post, BpeVocab& v) {
  if (!post.is_object()) return;
  const auto type = post.find("type");
  if (type == post.end() || !type->is_string()) return;
  std::vector<const json*> processors;
  if (*type == "Sequence") {
    const auto list = post.find("processors");
    if (list == post.end() || !list->is_array()) return;
    for (const json& p : *list) processors.push_back(&p);
  } else {
    processors.push_back(&post);
  }
  for (const json* p : processors) {
    if (!p->is_object() || p->value("type", "") != "TemplateProcessing") continue;
    const auto single = p->find("single");
    const auto specials = p->find("special_tokens");
    if (single == p->end() || !single->is_array() || single->empty() || specials == p->end() ||
        !specials->is_object()) {
      continue;
    }
    auto special_id = [&](const json& item) -> int {
      const auto st = item.find("SpecialToken");
      if (st == item.end() || !st->is_object()) return -1;
      const std::string name = f.String(f.Member(*st, "id", "post_processor.single.SpecialToken"),
                                        "post_processor.single.SpecialToken.id");
      const auto entry = specials->find(name);
      if (entry == specials->end()) {
        throw ConfigError(fmt::format("post_processor names special token '{}' that special_tokens lacks", name));
      }
      const json& ids = f.Member(*entry, "ids", "post_processor.special_tokens");
      if (!ids.is_array() || ids.size() != 1) throw f.Bad("post_processor.special_tokens.ids", "one id", ids);
      return f.Id(ids[0], "post_processor.special_tokens.ids[0]");
    };
    const int first = special_id(single->front());
    if (first >= 0) {
      v.bos_id = first;
      v.add_bos = true;
    }
    const int last = single->size() > 1 ? special_id(single->back()) : -1;
    if (last >= 0) {
      v.eos_id = last;
      v.add_eos = true;
    }
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> LoadHfTokenizerJson(std::string_view tokenizer_json, const std::string& source,
                                                  std::string_view tokenizer_config_json) {
  const json root = ParseJsonBounded(tokenizer_json, source, kMaxJsonDepth);
  const Fields f(source);
  if (!root.is_object()) throw f.Bad("the top level", "an object", root);
  const json& model = f.Object(root, "model", "tokenizer");
  const std::string type = model.contains("type") ? f.String(model["type"], "model.type") : "BPE";
  if (type != "BPE") {
    throw ConfigError(fmt::format("'{}': model.type '{}' is not supported (byte-level BPE only: WordPiece, "
                                  "Unigram and WordLevel tokenizers are not)",
                                  source, type));
  }
  if (f.Bool(model, "byte_fallback", false, "model")) {
    throw f.Unsupported("model.byte_fallback (a SentencePiece-style tokenizer.json: use its tokenizer.model)");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    const auto it = model.find(key);
    if (it != model.end() && !it->is_null() && !(it->is_string() && it->get<std::string>().empty())) {
      throw f.Unsupported(fmt::format("model.{} {}", key, it->dump()));
    }
  }
  if (const auto it = model.find("dropout"); it != model.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) throw f.Unsupported("model.dropout " + it->dump());
  }

  BpeVocab v;
  v.source = source;
  v.ignore_merges = f.Bool(model, "ignore_merges", false, "model");
  // Ids: model.vocab, then added_tokens (which may extend it or rename an id).
  std::map<int, std::string> by_id;
  const json& vocab = f.Object(model, "vocab", "model");
  for (const auto& [token, id_json] : vocab.items()) {
    const int id = f.Id(id_json, "model.vocab[\"" + token + "\"]");
    const auto [it, inserted] = by_id.emplace(id, token);
    if (!inserted) {
      throw ConfigError(fmt::format("'{}': model.vocab gives id {} to both '{}' and '{}'", source, id, it->second,
                                    token));
    }
  }
  struct Added {
    int id;
    std::string content;
    bool special, lstrip, rstrip;
  };
  std::vector<Added> added;
  if (const auto it = root.find("added_tokens"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) throw f.Bad("added_tokens", "an array", *it);
    for (size_t i = 0; i < it->size(); ++i) {
      const json& a = (*it)[i];
      const std::string where = fmt::format("added_tokens[{}]", i);
      if (!a.is_object()) throw f.Bad(where, "an object", a);
      Added t{f.Id(f.Member(a, "id", where), where + ".id"), f.String(f.Member(a, "content", where), where + ".content"),
              f.Bool(a, "special", false, where), f.Bool(a, "lstrip", false, where), f.Bool(a, "rstrip", false, where)};
      if (f.Bool(a, "single_word", false, where)) throw f.Unsupported(where + ".single_word true");
      if (t.content.empty()) throw f.Bad(where + ".content", "non-empty", a["content"]);
      by_id[t.id] = t.content;
      added.push_back(std::move(t));
    }
  }
  if (by_id.empty()) throw ConfigError(fmt::format("'{}': model.vocab is empty", source));
  const int n = by_id.rbegin()->first + 1;
  if (static_cast<size_t>(n) != by_id.size()) {
    int expect = 0;
    for (const auto& [id, token] : by_id) {
      if (id != expect) break;
      ++expect;
    }
    throw ConfigError(fmt::format("'{}': no token has id {} (ids must cover [0, {}) without gaps)", source, expect, n));
  }
  v.tokens.reserve(static_cast<size_t>(n));
  for (auto& [id, token] : by_id) v.tokens.push_back(std::move(token));
  v.types.assign(static_cast<size_t>(n), TokenType::kNormal);
  for (const Added& a : added) {
    v.types[static_cast<size_t>(a.id)] = a.special ? TokenType::kControl : TokenType::kUserDefined;
    (a.special ? v.special : v.added).push_back({a.id, a.content, a.lstrip, a.rstrip});
  }
  auto id_of = [&](const std::string& token, const std::string& where) {
    for (int i = 0; i < n; ++i) {
      if (v.tokens[static_cast<size_t>(i)] == token) return i;
    }
    throw ConfigError(fmt::format("'{}': {} '{}' is not a token", source, where, token));
  };
  if (const auto it = model.find("unk_token"); it != model.end() && !it->is_null()) {
    v.unk_id = id_of(f.String(*it, "model.unk_token"), "model.unk_token");
    v.types[static_cast<size_t>(v.unk_id)] = TokenType::kUnknown;
  }

  const json& merges = f.Member(model, "merges", "model");
  if (!merges.is_array()) throw f.Bad("model.merges", "an array", merges);
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& m = merges[i];
    const std::string where = fmt::format("model.merges[{}]", i);
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const size_t space = s.find(' ', 1);
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        throw f.Bad(where, "two tokens separated by one space", m);
      }
      v.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2) {
      v.merges.emplace_back(f.String(m[0], where + "[0]"), f.String(m[1], where + "[1]"));
    } else {
      throw f.Bad(where, "\"a b\" or [\"a\", \"b\"]", m);
    }
  }

  if (const auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    const std::string nt = it->is_object() ? it->value("type", "") : "";
    if (nt != "NFC") throw f.Unsupported(fmt::format("normalizer {}", it->dump().substr(0, 80)));
    v.nfc = true;
  }
  std::vector<PreTokenizerStep> steps;
  int byte_level = 0;
  const auto pre = root.find("pre_tokenizer");
  if (pre == root.end() || pre->is_null()) {
    throw f.Unsupported("a BPE model without a ByteLevel pre_tokenizer (SentencePiece-style: use tokenizer.model)");
  }
  AddPreTokenizer(f, *pre, "pre_tokenizer", steps, byte_level);
  if (byte_level != 1) {
    throw f.Unsupported(fmt::format("a pre_tokenizer with {} ByteLevel steps (byte-level BPE needs exactly one)",
                                    byte_level));
  }
  if (const auto it = root.find("post_processor"); it != root.end()) ReadTemplate(f, *it, v);

  if (!tokenizer_config_json.empty()) {
    const std::string config_source = source + " (tokenizer_config.json)";
    const json config = ParseJsonBounded(tokenizer_config_json, config_source, kMaxJsonDepth);
    const Fields fc(config_source);
    if (!config.is_object()) throw fc.Bad("the top level", "an object", config);
    auto token_field = [&](const char* key) -> int {
      const auto it = config.find(key);
      if (it == config.end() || it->is_null()) return -2;
      const json& t = it->is_object() ? fc.Member(*it, "content", key) : *it;
      return id_of(fc.String(t, key), std::string("tokenizer_config.json ") + key);
    };
    // An explicit null says the tokenizer has no such token (Qwen2.5: bos_token null, so transformers adds none);
    // an absent key leaves tokenizer.json's own.
    auto explicit_null = [&](const char* key) {
      const auto it = config.find(key);
      return it != config.end() && it->is_null();
    };
    if (const int bos = token_field("bos_token"); bos != -2) v.bos_id = bos;
    if (explicit_null("bos_token")) {
      v.bos_id = -1;
      v.add_bos = false;
    }
    if (const int eos = token_field("eos_token"); eos != -2) v.eos_id = eos;
    if (explicit_null("eos_token")) {
      v.eos_id = -1;
      v.add_eos = false;
    }
    v.add_bos = fc.Bool(config, "add_bos_token", v.add_bos, "tokenizer_config");
    v.add_eos = fc.Bool(config, "add_eos_token", v.add_eos, "tokenizer_config");
    if (v.add_bos && v.bos_id < 0) {
      throw ConfigError(fmt::format("{}: add_bos_token is true but bos_token is null: there is no BOS to add",
                                    config_source));
    }
    if (v.add_eos && v.eos_id < 0) {
      throw ConfigError(fmt::format("{}: add_eos_token is true but eos_token is null: there is no EOS to add",
                                    config_source));
    }
  }
  return std::make_unique<BpeTokenizer>(std::move(v), PreTokenizer(std::move(steps), "tokenizer.json"));
}

}  // namespace posenc
