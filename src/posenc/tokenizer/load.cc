#include "posenc/tokenizer/load.h"

#include <sys/stat.h>

#include <cstring>
#include <optional>
#include <span>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/llama2c.h"
#include "posenc/formats/gguf.h"
#include "posenc/formats/mapped_file.h"
#include "posenc/io/json_read.h"
#include "posenc/tokenizer/gguf_vocab.h"
#include "posenc/tokenizer/hf_tokenizer_json.h"
#include "posenc/tokenizer/llama2c.h"
#include "posenc/tokenizer/sentencepiece_model.h"

namespace posenc {
namespace {

enum class Kind { kMissing, kDirectory, kRegular, kOther };

Kind KindOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Kind::kMissing;
  if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
  if (S_ISREG(st.st_mode)) return Kind::kRegular;
  return Kind::kOther;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Head(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open tokenizer '{}': {}", path, std::strerror(errno)));
  std::string head(n, '\0');
  in.read(head.data(), static_cast<std::streamsize>(n));
  head.resize(static_cast<size_t>(in.gcount()));
  return head;
}

// The bytes of a regular file (MappedFile refuses anything else before opening it).
std::string_view Bytes(const std::shared_ptr<const MappedFile>& file) {
  return {reinterpret_cast<const char*>(file->data()), file->size()};
}

std::unique_ptr<Tokenizer> LoadJson(const std::string& path, const std::string& dir) {
  const std::string config_path = (dir.empty() ? std::string(".") : dir) + "/tokenizer_config.json";
  const auto config = KindOf(config_path) == Kind::kRegular ? MappedFile::Open(config_path, "tokenizer") : nullptr;
  return LoadHfTokenizerJson(Bytes(MappedFile::Open(path, "tokenizer")), path, config ? Bytes(config) : std::string_view());
}

// A folder's tokenizer.model with the add_bos_token / add_eos_token of its tokenizer_config.json, if any.
std::unique_ptr<Tokenizer> LoadSentencePiece(const std::string& model, const std::string& dir) {
  std::unique_ptr<SentencePieceTokenizer> t =
      SentencePieceTokenizer::FromBytes(Bytes(MappedFile::Open(model, "tokenizer")), model);
  const std::string config_path = (dir.empty() ? std::string(".") : dir) + "/tokenizer_config.json";
  if (KindOf(config_path) != Kind::kRegular) return t;
  const auto file = MappedFile::Open(config_path, "tokenizer");
  const nlohmann::json config = ParseJsonBounded(Bytes(file), config_path, 64);
  auto flag = [&](const char* key, bool fallback) {
    const auto it = config.is_object() ? config.find(key) : config.end();
    if (it == config.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) {
      throw ConfigError(fmt::format("{}: {} must be true or false, got {}", config_path, key, it->dump()));
    }
    return it->get<bool>();
  };
  t->SetAddFlags(flag("add_bos_token", t->add_bos_default()), flag("add_eos_token", t->add_eos_default()),
                 config_path);
  return t;
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

const char* TokenizerSourceName(TokenizerSource source) {
  switch (source) {
    case TokenizerSource::kGguf:
      return "GGUF";
    case TokenizerSource::kHfDirectory:
      return "Hugging Face directory";
    case TokenizerSource::kTokenizerJson:
      return "tokenizer.json";
    case TokenizerSource::kSentencePiece:
      return "sentencepiece tokenizer.model";
    case TokenizerSource::kLlama2c:
      return "llama2.c tokenizer";
  }
  return "?";
}

TokenizerSource DetectTokenizerSource(const std::string& path) {
  switch (KindOf(path)) {
    case Kind::kMissing:
      throw IoError(fmt::format("cannot open tokenizer '{}': {}", path, std::strerror(errno)));
    case Kind::kDirectory:
      return TokenizerSource::kHfDirectory;
    case Kind::kOther:
      throw IoError(fmt::format("tokenizer '{}' is not a regular file (a FIFO, socket or device)", path));
    case Kind::kRegular:
      break;
  }
  const std::string head = Head(path, 64);
  if (head.compare(0, 4, "GGUF") == 0) return TokenizerSource::kGguf;
  const size_t first = head.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && head[first] == '{') return TokenizerSource::kTokenizerJson;
  if (EndsWith(path, ".bin")) return TokenizerSource::kLlama2c;
  return TokenizerSource::kSentencePiece;
}

namespace {

// A Hugging Face folder's tokenizer: tokenizer.json, or tokenizer.model when there is no tokenizer.json or it is
// refused (its reason kept as a note).
std::unique_ptr<Tokenizer> LoadHfDirectory(const std::string& path) {
  const std::string json = path + "/tokenizer.json", model = path + "/tokenizer.model";
  const bool has_model = KindOf(model) == Kind::kRegular;
  if (KindOf(json) == Kind::kRegular) {
    try {
      return LoadJson(json, path);
    } catch (const Error& refused) {
      if (!has_model) throw;
      std::unique_ptr<Tokenizer> t;
      try {
        t = LoadSentencePiece(model, path);
      } catch (const Error& also) {
        throw ConfigError(fmt::format("{} (and tokenizer.model beside it is refused too: {})", refused.what(),
                                      also.what()));
      }
      t->AddNote(fmt::format("tokenizer.json is refused ({}); the tokenizer.model beside it is used", refused.what()));
      return t;
    }
  }
  if (has_model) return LoadSentencePiece(model, path);
  throw IoError(fmt::format("directory '{}' has neither tokenizer.json nor tokenizer.model", path));
}

std::unique_ptr<Tokenizer> LoadBySource(const std::string& path, const TokenizerLoadOptions& options) {
  switch (DetectTokenizerSource(path)) {
    case TokenizerSource::kGguf:
      return LoadGgufTokenizer(GgufFile::Open(path));
    case TokenizerSource::kHfDirectory:
      return LoadHfDirectory(path);
    case TokenizerSource::kTokenizerJson:
      return LoadJson(path, DirOf(path));
    case TokenizerSource::kSentencePiece:
      return LoadSentencePiece(path, DirOf(path));
    case TokenizerSource::kLlama2c: {
      const auto file = MappedFile::Open(path, "tokenizer");
      const std::string_view bytes = Bytes(file);
      const int64_t n = options.llama2c_vocab_size > 0 ? options.llama2c_vocab_size
                                                        : Llama2cTokenizer::CountPieces(bytes, path);
      return std::make_unique<Llama2cTokenizer>(Llama2cTokenizer::FromBytes(bytes, n, path));
    }
  }
  throw IoError(fmt::format("tokenizer '{}': unknown kind", path));
}

}  // namespace

std::unique_ptr<Tokenizer> LoadTokenizer(const std::string& path, const TokenizerLoadOptions& options) {
  std::unique_ptr<Tokenizer> t = LoadBySource(path, options);
  if (options.parse_special) t->set_parse_special(true);
  return t;
}

namespace {

// The checkpoint header of a llama2.c model file, or nothing if the bytes are not one.
std::optional<Llama2cHeader> Llama2cCheckpointConfig(const std::string& path) {
  if (KindOf(path) != Kind::kRegular) return std::nullopt;
  const std::string head = Head(path, 28);
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  try {
    return ParseCheckpointHeader(
        std::span<const unsigned char>(reinterpret_cast<const unsigned char*>(head.data()), head.size()),
        static_cast<int64_t>(st.st_size));
  } catch (const Error&) {
    return std::nullopt;
  }
}

}  // namespace

std::unique_ptr<Tokenizer> LoadModelTokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                              bool parse_special) {
  TokenizerLoadOptions options;
  options.parse_special = parse_special;
  if (tokenizer_path.empty()) {
    if (DetectTokenizerSource(model_path) == TokenizerSource::kLlama2c && Llama2cCheckpointConfig(model_path)) {
      throw ConfigError(fmt::format("model '{}' is a llama2.c checkpoint, which holds no vocabulary: give its "
                                    "tokenizer .bin as well (`tokenizer_path`)",
                                    model_path));
    }
    return LoadTokenizer(model_path, options);
  }
  if (DetectTokenizerSource(tokenizer_path) == TokenizerSource::kLlama2c) {
    if (const auto config = Llama2cCheckpointConfig(model_path)) options.llama2c_vocab_size = config->vocab_size;
  }
  return LoadTokenizer(tokenizer_path, options);
}

}  // namespace posenc
