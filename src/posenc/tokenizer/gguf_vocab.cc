#include "posenc/tokenizer/gguf_vocab.h"

#include <optional>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr const char* kModel = "tokenizer.ggml.model";
constexpr const char* kPre = "tokenizer.ggml.pre";
constexpr const char* kTokens = "tokenizer.ggml.tokens";
constexpr const char* kScores = "tokenizer.ggml.scores";
constexpr const char* kTypes = "tokenizer.ggml.token_type";
constexpr const char* kMerges = "tokenizer.ggml.merges";

std::vector<std::string> Tokens(const GgufFile& g) {
  if (!g.Has(kTokens)) throw ConfigError(fmt::format("GGUF '{}' has no {}", g.path(), kTokens));
  const std::span<const std::string_view> views = g.GetArray(kTokens).Strings();
  return std::vector<std::string>(views.begin(), views.end());
}

std::vector<TokenType> Types(const GgufFile& g, size_t n) {
  const std::optional<GgufArray> a = g.FindArray(kTypes);
  if (!a) return std::vector<TokenType>(n, TokenType::kNormal);
  const std::vector<int32_t> raw = a->ToInt32();
  std::vector<TokenType> types(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] < 0 || raw[i] > 6) {
      throw ConfigError(
          fmt::format("GGUF '{}': {}[{}] must be a token type in 0..6, got {}", g.path(), kTypes, i, raw[i]));
    }
    types[i] = raw[i] == 0 ? TokenType::kNormal : static_cast<TokenType>(raw[i]);
  }
  return types;
}

// A special token id key: `fallback` when absent; checked against the vocabulary size.
int SpecialId(const GgufFile& g, const std::string& key, int fallback, size_t n) {
  const std::optional<int64_t> v = g.FindInt64(key);
  if (!v) return fallback < static_cast<int64_t>(n) ? fallback : -1;
  if (*v < 0 || *v >= static_cast<int64_t>(n)) {
    throw ConfigError(fmt::format("GGUF '{}': {} must be in [0, {}), got {}", g.path(), key, n, *v));
  }
  return static_cast<int>(*v);
}

bool Flag(const GgufFile& g, const char* key, bool fallback) { return g.FindBool(key).value_or(fallback); }

bool IsLlama3Pre(const std::string& pre) { return pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3"; }

}  // namespace

SpmVocab ReadGgufSpmVocab(const GgufFile& g) {
  SpmVocab v;
  v.source = g.path();
  v.tokens = Tokens(g);
  const size_t n = v.tokens.size();
  v.scores = g.Has(kScores) ? g.GetArray(kScores).ToFloat32() : std::vector<float>(n, 0.0f);
  v.types = Types(g, n);
  v.bos_id = SpecialId(g, "tokenizer.ggml.bos_token_id", 1, n);
  v.eos_id = SpecialId(g, "tokenizer.ggml.eos_token_id", 2, n);
  v.unk_id = SpecialId(g, "tokenizer.ggml.unknown_token_id", 0, n);
  v.add_bos = Flag(g, "tokenizer.ggml.add_bos_token", true);
  v.add_eos = Flag(g, "tokenizer.ggml.add_eos_token", false);
  v.add_space_prefix = Flag(g, "tokenizer.ggml.add_space_prefix", true);
  return v;
}

BpeVocab ReadGgufBpeVocab(const GgufFile& g) {
  BpeVocab v;
  v.source = g.path();
  v.tokens = Tokens(g);
  const size_t n = v.tokens.size();
  v.types = Types(g, n);
  if (!g.Has(kMerges)) throw ConfigError(fmt::format("GGUF '{}' has no {}", g.path(), kMerges));
  const std::span<const std::string_view> merges = g.GetArray(kMerges).Strings();
  v.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const std::string_view m = merges[i];
    const size_t space = m.size() > 1 ? m.find(' ', 1) : std::string_view::npos;
    if (space == std::string_view::npos) {
      throw ConfigError(fmt::format("GGUF '{}': {}[{}] '{}' is not two tokens separated by a space", g.path(),
                                    kMerges, i, m));
    }
    v.merges.emplace_back(std::string(m.substr(0, space)), std::string(m.substr(space + 1)));
  }
  const std::string pre(g.FindString(kPre).value_or("default"));
  v.bos_id = SpecialId(g, "tokenizer.ggml.bos_token_id", -1, n);
  v.eos_id = SpecialId(g, "tokenizer.ggml.eos_token_id", -1, n);
  v.unk_id = SpecialId(g, "tokenizer.ggml.unknown_token_id", -1, n);
  v.add_bos = Flag(g, "tokenizer.ggml.add_bos_token", IsLlama3Pre(pre));
  v.add_eos = Flag(g, "tokenizer.ggml.add_eos_token", false);
  v.ignore_merges = IsLlama3Pre(pre);
  for (size_t i = 0; i < n && i < v.types.size(); ++i) {
    if (v.types[i] == TokenType::kUserDefined && !v.tokens[i].empty()) {
      v.added.push_back({static_cast<int>(i), v.tokens[i], false, false});
    }
  }
  return v;
}

std::unique_ptr<Tokenizer> LoadGgufTokenizer(const GgufFile& g) {
  if (!g.Has(kModel)) throw ConfigError(fmt::format("GGUF '{}' has no {}: it holds no tokenizer", g.path(), kModel));
  const std::string model(g.GetString(kModel));
  if (model == "llama") return std::make_unique<SpmTokenizer>(ReadGgufSpmVocab(g));
  if (model == "gpt2") {
    const std::optional<std::string_view> named = g.FindString(kPre);
    auto t = std::make_unique<BpeTokenizer>(ReadGgufBpeVocab(g),
                                            GgufPreTokenizer(std::string(named.value_or("default"))));
    if (!named) {
      t->AddNote(fmt::format("GGUF '{}' has no {}: the 'default' pre-tokenizer regex is used, which may split the "
                             "text other than the model was trained with (llama.cpp warns the same); a file written "
                             "by a current converter names it",
                             g.path(), kPre));
    }
    return t;
  }
  throw ConfigError(fmt::format("GGUF '{}': {} '{}' is not supported (\"llama\" SentencePiece and \"gpt2\" "
                                "byte-level BPE are)",
                                g.path(), kModel, model));
}

}  // namespace posenc
