#include "posenc/train/config_json.h"

#include <fmt/format.h>

#include <string>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

int64_t Integer(const nlohmann::json& j, const char* key) {
  const nlohmann::json& v = j.at(key);
  if (!v.is_number_integer()) {
    throw ConfigError(fmt::format("model config: {} must be an integer, got {}", key, v.dump()));
  }
  return v.get<int64_t>();
}

}  // namespace

TrainShape TrainShapeFromJson(const nlohmann::json& j) {
  if (!j.is_object()) throw ConfigError(fmt::format("model config must be a JSON object, got {}", j.type_name()));
  static const char* const kKnown[] = {"dim",        "hidden_dim",  "n_layers",       "n_heads",
                                       "n_kv_heads", "head_dim",    "vocab_size",     "max_seq_len",
                                       "norm_eps",   "attention_bias", "tied_embeddings", "position_encoding",
                                       "rope_theta",  "qk_norm"};
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : kKnown) known = known || key == k;
    if (!known) {
      throw ConfigError(fmt::format("model config: unknown key '{}' (known: dim, hidden_dim, n_layers, n_heads, "
                                    "n_kv_heads, head_dim, vocab_size, max_seq_len, norm_eps, attention_bias, "
                                    "tied_embeddings, position_encoding, rope_theta, qk_norm)", key));
    }
  }
  TrainShape c;
  for (const char* key : {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size", "max_seq_len"}) {
    if (!j.contains(key)) throw ConfigError(fmt::format("model config: missing required key '{}'", key));
  }
  c.dim = Integer(j, "dim");
  c.hidden_dim = Integer(j, "hidden_dim");
  c.n_layers = Integer(j, "n_layers");
  c.n_heads = Integer(j, "n_heads");
  c.n_kv_heads = Integer(j, "n_kv_heads");
  c.vocab_size = Integer(j, "vocab_size");
  c.max_seq_len = Integer(j, "max_seq_len");
  if (j.contains("head_dim")) c.head_dim = Integer(j, "head_dim");
  if (j.contains("norm_eps")) {
    if (!j["norm_eps"].is_number()) throw ConfigError(fmt::format("model config: norm_eps must be a number, got {}", j["norm_eps"].dump()));
    c.norm_eps = j["norm_eps"].get<double>();
  }
  if (j.contains("rope_theta")) {
    if (!j["rope_theta"].is_number()) {
      throw ConfigError(fmt::format("model config: rope_theta must be a number, got {}", j["rope_theta"].dump()));
    }
    c.rope_theta = j["rope_theta"].get<double>();
  }
  for (const auto& [key, field] : {std::pair<const char*, bool*>{"attention_bias", &c.attention_bias},
                                   {"tied_embeddings", &c.tied_embeddings},
                                   {"qk_norm", &c.qk_norm}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_boolean()) throw ConfigError(fmt::format("model config: {} must be true or false, got {}", key, j[key].dump()));
    *field = j[key].get<bool>();
  }
  if (j.contains("position_encoding")) {
    if (!j["position_encoding"].is_string()) {
      throw ConfigError(fmt::format("model config: position_encoding must be a string, got {}",
                                    j["position_encoding"].dump()));
    }
    c.position_encoding = ParsePositionEncoding(j["position_encoding"].get<std::string>());
  }
  ValidateTrainShape(c);
  return c;
}

nlohmann::json TrainShapeToJson(const TrainShape& c) {
  nlohmann::json j = {{"dim", c.dim},
                      {"hidden_dim", c.hidden_dim},
                      {"n_layers", c.n_layers},
                      {"n_heads", c.n_heads},
                      {"n_kv_heads", c.n_kv_heads},
                      {"head_dim", c.head_dim},
                      {"vocab_size", c.vocab_size},
                      {"max_seq_len", c.max_seq_len},
                      {"norm_eps", c.norm_eps},
                      {"attention_bias", c.attention_bias},
                      {"tied_embeddings", c.tied_embeddings},
                      {"position_encoding", std::string(PositionEncodingName(c.position_encoding))},
                      {"rope_theta", c.rope_theta}};
  if (c.qk_norm) j["qk_norm"] = true;  // only when set: the keys of earlier states stay as they were written
  return j;
}

}  // namespace posenc
