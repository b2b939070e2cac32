// GgufKeys and HfKeys: a file's hyperparameters read with checks, and the positional keys nobody read.
#include <cmath>
#include <string_view>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/arch.h"

namespace posenc {
namespace {

using nlohmann::json;

// Sizes above this are refused before any product is formed (sizes of real models are far below).
constexpr int64_t kMaxSize = int64_t{1} << 31;

bool StartsWith(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

}  // namespace

GgufKeys::GgufKeys(const GgufFile& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

std::string GgufKeys::Key(std::string_view key) const { return arch_ + "." + std::string(key); }

bool GgufKeys::Has(std::string_view key) const { return file_.Has(Key(key)); }

void GgufKeys::MarkRead(std::string_view key) { read_.insert(Key(key)); }

int64_t GgufKeys::Size(std::string_view key) {
  const std::string k = Key(key);
  read_.insert(k);
  const int64_t v = file_.GetInt64(k);  // ConfigError naming the key when absent or not an integer
  if (v < 1 || v > kMaxSize) throw ConfigError(fmt::format("{}: {} must be in [1, 2^31], got {}", source(), k, v));
  return v;
}

int64_t GgufKeys::LayerCount(std::string_view key) {
  const int64_t n = Size(key);
  const int64_t n_tensors = static_cast<int64_t>(file_.tensors().size());
  if (n > n_tensors) {
    throw ConfigError(fmt::format("{}: {} = {} but the file holds {} tensor(s); every layer has tensors of its own",
                                  source(), Key(key), n, n_tensors));
  }
  return n;
}

std::optional<int64_t> GgufKeys::OptSize(std::string_view key) {
  if (!Has(key)) return std::nullopt;
  return Size(key);
}

std::optional<int64_t> GgufKeys::OptCount(std::string_view key) {
  const std::string k = Key(key);
  if (!file_.Has(k)) return std::nullopt;
  read_.insert(k);
  const int64_t v = file_.GetInt64(k);
  if (v < 0 || v > kMaxSize) throw ConfigError(fmt::format("{}: {} must be in [0, 2^31], got {}", source(), k, v));
  return v;
}

double GgufKeys::Float(std::string_view key) {
  const std::string k = Key(key);
  read_.insert(k);
  const double v = file_.GetFloat(k);
  if (!std::isfinite(v) || v <= 0) throw ConfigError(fmt::format("{}: {} must be finite and > 0, got {}", source(), k, v));
  return v;
}

std::optional<double> GgufKeys::OptFloat(std::string_view key, bool allow_zero, bool allow_negative) {
  const std::string k = Key(key);
  if (!file_.Has(k)) return std::nullopt;
  read_.insert(k);
  const double v = file_.GetFloat(k);
  const bool ok = std::isfinite(v) && (v > 0 || (allow_zero && v == 0) || (allow_negative && v < 0));
  if (!ok) {
    throw ConfigError(fmt::format("{}: {} must be finite and {}, got {}", source(), k,
                                  allow_negative ? "a number" : (allow_zero ? ">= 0" : "> 0"), v));
  }
  return v;
}

std::optional<bool> GgufKeys::OptBool(std::string_view key) {
  const std::string k = Key(key);
  if (!file_.Has(k)) return std::nullopt;
  read_.insert(k);
  return file_.GetBool(k);
}

std::optional<std::string> GgufKeys::OptString(std::string_view key) {
  const std::string k = Key(key);
  if (!file_.Has(k)) return std::nullopt;
  read_.insert(k);
  return std::string(file_.GetString(k));
}

std::optional<std::vector<int64_t>> GgufKeys::OptIntsOrArray(std::string_view key, int64_t n) {
  const std::string k = Key(key);
  if (!file_.Has(k)) return std::nullopt;
  read_.insert(k);
  std::vector<int64_t> out;
  if (file_.TypeOf(k) == GgufType::kArray) {
    const GgufArray a = file_.GetArray(k);
    if (static_cast<int64_t>(a.size()) != n) {
      throw ConfigError(fmt::format("{}: {} must have {} entries (one per layer), got {}", source(), k, n, a.size()));
    }
    for (size_t i = 0; i < a.size(); ++i) {
      out.push_back(a.element_type() == GgufType::kBool ? (a.BoolAt(i) ? 1 : 0) : a.Int64At(i));
    }
  } else {
    out.assign(static_cast<size_t>(n), file_.GetInt64(k));
  }
  return out;
}

std::vector<std::string> GgufKeys::UnreadPositionalKeys() const {
  std::vector<std::string> out;
  const std::string prefixes[] = {Key("rope."), Key("attention.sliding_window"), Key("attention.scale"),
                                  Key("attn_logit_softcapping"), Key("final_logit_softcapping"),
                                  Key("attention.temperature")};
  for (std::string_view key : file_.keys()) {
    for (const std::string& p : prefixes) {
      if (StartsWith(key, p) && !read_.count(std::string(key))) {
        out.emplace_back(key);
        break;
      }
    }
  }
  return out;
}

HfKeys::HfKeys(const json& config, std::string source, int64_t n_tensors)
    : config_(config), source_(std::move(source)), n_tensors_(n_tensors) {}

int64_t HfKeys::LayerCount(std::string_view key) {
  const int64_t n = Size(key);
  if (n > n_tensors_) {
    throw ConfigError(fmt::format("{}: {} = {} but the checkpoint holds {} tensor(s); every layer has tensors of "
                                  "its own", source_, key, n, n_tensors_));
  }
  return n;
}

const json* HfKeys::Get(std::string_view key) {
  read_.insert(std::string(key));
  auto it = config_.find(std::string(key));
  return it == config_.end() || it->is_null() ? nullptr : &*it;
}

bool HfKeys::Has(std::string_view key) const {
  auto it = config_.find(std::string(key));
  return it != config_.end() && !it->is_null();
}

void HfKeys::MarkRead(std::string_view key) { read_.insert(std::string(key)); }

int64_t HfKeys::Size(std::string_view key) {
  const json* v = Get(key);
  if (v == nullptr) throw ConfigError(fmt::format("{}: required key '{}' is missing", source_, key));
  if (!v->is_number_integer()) {
    throw ConfigError(fmt::format("{}: '{}' must be an integer, got {}", source_, key, v->dump()));
  }
  // An unsigned value past int64's range would wrap in get<int64_t>(): the message shows the value as written.
  if ((v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(kMaxSize)) || v->get<int64_t>() < 1 ||
      v->get<int64_t>() > kMaxSize) {
    throw ConfigError(fmt::format("{}: {} must be in [1, 2^31], got {}", source_, key, v->dump()));
  }
  return v->get<int64_t>();
}

std::optional<int64_t> HfKeys::OptSize(std::string_view key) {
  if (!Has(key)) {
    MarkRead(key);
    return std::nullopt;
  }
  return Size(key);
}

std::optional<int64_t> HfKeys::OptCount(std::string_view key) {
  const json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(kMaxSize)) ||
      v->get<int64_t>() < 0 || v->get<int64_t>() > kMaxSize) {
    throw ConfigError(fmt::format("{}: '{}' must be an integer in [0, 2^31], got {}", source_, key, v->dump()));
  }
  return v->get<int64_t>();
}

std::optional<double> HfKeys::OptFloat(std::string_view key) {
  const json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) throw ConfigError(fmt::format("{}: '{}' must be a number, got {}", source_, key, v->dump()));
  const double d = v->get<double>();
  if (!std::isfinite(d)) throw ConfigError(fmt::format("{}: '{}' must be finite, got {}", source_, key, v->dump()));
  return d;
}

bool HfKeys::Bool(std::string_view key, bool fallback) {
  const json* v = Get(key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) {
    throw ConfigError(fmt::format("{}: '{}' must be true or false, got {}", source_, key, v->dump()));
  }
  return v->get<bool>();
}

std::optional<std::string> HfKeys::OptString(std::string_view key) {
  const json* v = Get(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) throw ConfigError(fmt::format("{}: '{}' must be a string, got {}", source_, key, v->dump()));
  return v->get<std::string>();
}

std::vector<std::string> HfKeys::UnreadPositionalKeys() const {
  static const char* const kExact[] = {"sliding_window",        "use_sliding_window",      "max_window_layers",
                                       "layer_types",           "sliding_window_pattern",  "no_rope_layers",
                                       "no_rope_layer_interval", "partial_rotary_factor",  "position_embedding_type",
                                       "dual_chunk_attention_config", "attention_chunk_size", "use_mrope",
                                       "mrope_section",         "query_pre_attn_scalar",   "attn_logit_softcapping",
                                       "final_logit_softcapping", "n_positions",           "original_max_position_embeddings",
                                       "use_dynamic_ntk",       "use_logn_attn",           "attn_temperature_tuning",
                                       "floor_scale",           "attn_scale",              "interleaved_sliding_window"};
  std::vector<std::string> out;
  for (const auto& [key, value] : config_.items()) {
    if (value.is_null() || read_.count(key)) continue;
    bool positional = StartsWith(key, "rope_") || StartsWith(key, "rotary_");
    for (const char* e : kExact) positional = positional || key == e;
    if (positional) out.push_back(key);
  }
  return out;
}

}  // namespace posenc
