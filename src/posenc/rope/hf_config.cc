#include "posenc/rope/hf_config.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/io/json_read.h"
#include "posenc/rope/rope_types.h"

namespace posenc {
namespace {

using nlohmann::json;

// A JSON value that is absent or null counts as "not given", as HF's dict.get / getattr do.
const json* Get(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

double Number(const json& v, const std::string& field) {
  if (!v.is_number()) throw ConfigError(fmt::format("{} must be a number, got {}", field, JsonSnippet(v)));
  return v.get<double>();
}

int64_t Integer(const json& v, const std::string& field) {
  const double d = Number(v, field);
  if (d != std::floor(d) || std::fabs(d) > 9.0e15) {
    throw ConfigError(fmt::format("{} must be an integer, got {}", field, JsonSnippet(v)));
  }
  return static_cast<int64_t>(d);
}

std::optional<double> OptNumber(const json& obj, const char* key, const std::string& prefix) {
  const json* v = Get(obj, key);
  if (!v) return std::nullopt;
  return Number(*v, prefix + key);
}

std::vector<double> NumberList(const json& obj, const char* key) {
  const json* v = Get(obj, key);
  if (!v) return {};
  const std::string field = std::string("rope_parameters.") + key;
  if (!v->is_array()) {
    throw ConfigError(fmt::format("{} must be a list of numbers, got {}", field, JsonSnippet(*v)));
  }
  std::vector<double> out;
  for (size_t i = 0; i < v->size(); ++i) out.push_back(Number((*v)[i], fmt::format("{}[{}]", field, i)));
  return out;
}

std::string TypeString(const json& v, const char* field) {
  if (!v.is_string()) throw ConfigError(fmt::format("{} must be a string, got {}", field, JsonSnippet(v)));
  return v.get<std::string>();
}

// rope_parameters (v5) or rope_scaling (v4): both present must agree.
json RopeDict(const json& config) {
  const json* params = Get(config, "rope_parameters");
  const json* scaling = Get(config, "rope_scaling");
  if (params && !params->is_object()) {
    throw ConfigError(fmt::format("rope_parameters must be an object, got {}", JsonSnippet(*params)));
  }
  if (scaling && !scaling->is_object()) {
    throw ConfigError(fmt::format("rope_scaling must be an object, got {}", JsonSnippet(*scaling)));
  }
  if (params && scaling) {
    for (const auto& [key, value] : scaling->items()) {
      if (params->contains(key) && (*params)[key] != value) {
        throw ConfigError(fmt::format("rope_scaling.{} = {} conflicts with rope_parameters.{} = {}", key,
                                      JsonSnippet(value), key, JsonSnippet((*params)[key])));
      }
    }
    json merged = *scaling;
    merged.update(*params);
    return merged;
  }
  if (params) return *params;
  if (scaling) return *scaling;
  return json::object();
}

// Both spellings of one value (nested and top level): they must agree when both are present.
std::optional<double> Agreeing(const json& config, const json& rope, const char* key) {
  std::optional<double> top = OptNumber(config, key, "");
  std::optional<double> nested = OptNumber(rope, key, "rope_parameters.");
  if (top && nested && *top != *nested) {
    throw ConfigError(fmt::format("rope_parameters.{} = {} conflicts with top-level {} = {}", key, *nested, key,
                                  *top));
  }
  return nested ? nested : top;
}

}  // namespace

std::vector<std::string> NestedRopeLayerTypes(const json& config) {
  std::vector<std::string> types;
  const json* params = Get(config, "rope_parameters");
  if (params == nullptr || !params->is_object() || params->empty()) return types;
  size_t objects = 0;
  for (const auto& [key, value] : params->items()) {
    if (value.is_object()) ++objects;
  }
  if (objects == 0) return types;
  if (objects != params->size()) {
    throw ConfigError(fmt::format("rope_parameters mixes per-layer-type entries (objects) with flat keys: {}",
                                  JsonSnippet(*params)));
  }
  for (const auto& [key, value] : params->items()) types.push_back(key);
  return types;
}

HfRopeConfig ParseHfRopeConfig(const json& config, const std::optional<std::string>& layer_type) {
  if (!config.is_object()) {
    throw ConfigError(fmt::format("config must be a JSON object, got {}", JsonSnippet(config)));
  }
  const std::vector<std::string> nested = NestedRopeLayerTypes(config);
  if (!nested.empty()) {
    std::string list;
    for (const std::string& t : nested) list += (list.empty() ? "" : ", ") + t;
    if (!layer_type) {
      throw ConfigError(fmt::format("rope_parameters is given per layer type ({}): name the layer type to read "
                                    "(transformers' rotary embedding takes layer_type)", list));
    }
    const json& params = config.at("rope_parameters");
    if (!params.contains(*layer_type)) {
      throw ConfigError(fmt::format("rope_parameters has no entry for layer type '{}' (it has {})", *layer_type,
                                    list));
    }
    if (Get(config, "rope_scaling") != nullptr) {
      throw ConfigError("rope_scaling cannot be combined with rope_parameters given per layer type");
    }
    json flat = config;
    flat["rope_parameters"] = params.at(*layer_type);
    return ParseHfRopeConfig(flat, std::nullopt);
  }
  HfRopeConfig out;
  RopeParams& p = out.params;
  const json rope = RopeDict(config);
  const json* model_type = Get(config, "model_type");
  const std::string mt = (model_type && model_type->is_string()) ? model_type->get<std::string>() : "";
  const bool chatglm = mt == "chatglm";

  // rope_type / legacy type
  const json* rope_type = Get(rope, "rope_type");
  const json* legacy_type = Get(rope, "type");
  std::string type_name = "default";
  if (rope_type) type_name = TypeString(*rope_type, "rope_parameters.rope_type");
  if (legacy_type) {
    const std::string legacy = TypeString(*legacy_type, "rope_parameters.type");
    if (rope_type && legacy != type_name) {
      throw ConfigError(fmt::format("rope_parameters.type = '{}' conflicts with rope_parameters.rope_type = '{}'",
                                    legacy, type_name));
    }
    type_name = legacy;
  }
  // Legacy names: "su" is LongRoPE's first name (early Phi-3 configs); Phi3Config also turns "yarn" into
  // "longrope" (transformers Phi3Config.convert_rope_params_to_dict, "backward compatibility").
  if (type_name == "su" || (mt == "phi3" && type_name == "yarn")) {
    out.warnings.push_back(fmt::format("rope_type '{}' read as 'longrope'{}", type_name,
                                       mt == "phi3" ? " (as transformers' Phi3Config does)" : " (its legacy name)"));
    type_name = "longrope";
  }
  p.rope_type = ParseRopeType(type_name);
  const RopeTypeRow& row = RopeTypeRowOf(p.rope_type);

  // rope_theta, and the family spellings of the base:
  //   rotary_emb_base: GPT-NeoX, GPT-NeoX-Japanese (transformers' config classes set rope_theta from it) and
  //     Qwen-1 (its RotaryEmbedding takes base=config.rotary_emb_base);
  //   rope_ratio: ChatGLM2/3 and GLM-4 remote code, base = 10000 * rope_ratio (RotaryEmbedding.forward_impl).
  // A base spelled twice must agree; a spelling whose family is unknown is refused rather than ignored.
  std::optional<double> theta = Agreeing(config, rope, "rope_theta");
  if (std::optional<double> emb_base = OptNumber(config, "rotary_emb_base", "")) {
    if (theta && *theta != *emb_base) {
      throw ConfigError(fmt::format("rotary_emb_base = {} conflicts with rope_theta = {}", *emb_base, *theta));
    }
    theta = emb_base;
  }
  if (std::optional<double> ratio = OptNumber(config, "rope_ratio", "")) {
    if (!chatglm) {
      throw ConfigError(fmt::format(
          "rope_ratio = {} is ChatGLM's base multiplier (base = 10000 * rope_ratio), but model_type is '{}': "
          "posenc does not know how this family reads rope_ratio, so it refuses the config rather than ignore it",
          *ratio, mt));
    }
    if (!std::isfinite(*ratio) || *ratio <= 0.0) {
      throw ConfigError(fmt::format("rope_ratio must be a finite number > 0, got {}", *ratio));
    }
    const double base = 10000.0 * *ratio;
    if (theta && *theta != base) {
      throw ConfigError(fmt::format("rope_ratio = {} (base 10000 * rope_ratio = {}) conflicts with rope_theta = {}",
                                    *ratio, base, *theta));
    }
    theta = base;
  }
  if (theta) {
    p.rope_theta = *theta;
  } else {
    p.rope_theta = 10000.0;
    out.warnings.push_back(chatglm ? "rope_ratio not given: base 10000 * 1 = 10000 (ChatGLMConfig's default)"
                                   : "rope_theta not given: using 10000 (transformers' default_theta)");
  }

  // head_dim
  const json* head_dim = Get(config, "head_dim");
  const json* qk_rope_head_dim = Get(config, "qk_rope_head_dim");
  if (head_dim && Integer(*head_dim, "head_dim") != 0) {
    p.head_dim = Integer(*head_dim, "head_dim");
  } else if (qk_rope_head_dim) {
    p.head_dim = Integer(*qk_rope_head_dim, "qk_rope_head_dim");
  } else if (const json* kv_channels = Get(config, "kv_channels")) {
    p.head_dim = Integer(*kv_channels, "kv_channels");  // Qwen-1, ChatGLM: channels per attention head
  } else {
    const json* hidden = Get(config, "hidden_size");
    const json* heads = Get(config, "num_attention_heads");
    if (!hidden || !heads) {
      throw ConfigError("head_dim is not given and cannot be derived: need head_dim, or hidden_size and "
                        "num_attention_heads");
    }
    const int64_t h = Integer(*hidden, "hidden_size"), n = Integer(*heads, "num_attention_heads");
    if (n <= 0) throw ConfigError(fmt::format("num_attention_heads must be > 0, got {}", n));
    if (h <= 0) throw ConfigError(fmt::format("hidden_size must be > 0, got {}", h));
    p.head_dim = h / n;  // Python's hidden_size // num_attention_heads
  }
  if (p.head_dim <= 0) throw ConfigError(fmt::format("head_dim must be > 0, got {}", p.head_dim));

  // rotary_dim: explicit, else int(head_dim * partial_rotary_factor | rotary_pct)
  if (const json* rd = Get(config, "rotary_dim")) {
    p.rotary_dim = Integer(*rd, "rotary_dim");
    if (p.rotary_dim <= 0) throw ConfigError(fmt::format("rotary_dim must be > 0, got {}", p.rotary_dim));
  } else {
    std::optional<double> fraction = Agreeing(config, rope, "partial_rotary_factor");
    const char* fraction_field = "partial_rotary_factor";
    if (!fraction) {
      fraction = OptNumber(config, "rotary_pct", "");
      fraction_field = "rotary_pct";
    }
    if (!fraction && mt.rfind("glm", 0) == 0) {
      fraction = 0.5;  // GlmConfig / Glm4Config default: half of each head is rotated
      out.warnings.push_back("partial_rotary_factor not given: using 0.5, the GLM family default");
    } else if (!fraction && chatglm) {
      fraction = 0.5;  // ChatGLM: RotaryEmbedding(rotary_dim // 2), the first half of each head rotates
      out.warnings.push_back("ChatGLM rotates the first half of each head (RotaryEmbedding(head_dim // 2))");
    } else if (!fraction && mt == "gpt_neox") {
      fraction = 0.25;  // GPTNeoXConfig: partial_rotary_factor defaults to rotary_pct = 0.25
      fraction_field = "rotary_pct";
      out.warnings.push_back("rotary_pct not given: using 0.25, GPTNeoXConfig's default");
    }
    if (fraction) {
      if (!std::isfinite(*fraction) || *fraction <= 0.0 || *fraction > 1.0) {
        throw ConfigError(fmt::format("{} must be in (0, 1], got {}", fraction_field, *fraction));
      }
      p.rotary_dim = static_cast<int64_t>(static_cast<double>(p.head_dim) * *fraction);  // int() truncates
      if (p.rotary_dim < 1) {
        throw ConfigError(fmt::format("{} = {} leaves int(head_dim * {}) = 0 rotary channels", fraction_field,
                                      *fraction, *fraction));
      }
    }
  }

  if (const json* L = Get(config, "max_position_embeddings")) {
    p.max_position_embeddings = Integer(*L, "max_position_embeddings");
  }

  const std::string pre = "rope_parameters.";
  p.factor = OptNumber(rope, "factor", pre);
  const bool uses_original = std::find(row.keys.begin(), row.keys.end(), "original_max_position_embeddings") !=
                             row.keys.end();
  if (uses_original) {
    // Where transformers reads L0: `_compute_longrope_parameters` takes the top-level attribute first (Phi-3), then
    // the nested key; `_compute_yarn_parameters` and `_compute_llama3_parameters` read only the nested key (yarn
    // falls back to max_position_embeddings; a top-level original_max_position_embeddings does not reach them).
    const json* top = row.original_top_level_first ? Get(config, "original_max_position_embeddings") : nullptr;
    if (top != nullptr) {
      p.original_max_position_embeddings = Integer(*top, "original_max_position_embeddings");
    } else if (const json* nested = Get(rope, "original_max_position_embeddings")) {
      p.original_max_position_embeddings = Integer(*nested, pre + "original_max_position_embeddings");
    } else if (p.max_position_embeddings > 0) {
      p.original_max_position_embeddings = p.max_position_embeddings;
      out.warnings.push_back(fmt::format("original_max_position_embeddings not given: using "
                                         "max_position_embeddings = {}", p.max_position_embeddings));
    }
  }
  p.attention_factor = OptNumber(rope, "attention_factor", pre);
  p.beta_fast = OptNumber(rope, "beta_fast", pre);
  p.beta_slow = OptNumber(rope, "beta_slow", pre);
  p.mscale = OptNumber(rope, "mscale", pre);
  p.mscale_all_dim = OptNumber(rope, "mscale_all_dim", pre);
  if (const json* t = Get(rope, "truncate")) {
    if (!t->is_boolean()) {
      throw ConfigError(fmt::format("rope_parameters.truncate must be true or false, got {}", JsonSnippet(*t)));
    }
    p.truncate = t->get<bool>();
  }
  p.low_freq_factor = OptNumber(rope, "low_freq_factor", pre);
  p.high_freq_factor = OptNumber(rope, "high_freq_factor", pre);
  p.short_factor = NumberList(rope, "short_factor");
  p.long_factor = NumberList(rope, "long_factor");

  // Keys given but not used by this rope type are reported, never silently dropped (a dropped explicit
  // attention_factor once changed yarn's scale without a word).
  static const std::set<std::string> kCommon = {"rope_type", "type", "rope_theta", "partial_rotary_factor"};
  for (const auto& [key, value] : rope.items()) {
    const bool used = std::find(row.keys.begin(), row.keys.end(), key) != row.keys.end();
    if (!kCommon.count(key) && !used && !value.is_null()) {
      out.warnings.push_back(fmt::format("rope_parameters.{} = {} is not used by rope_type '{}'", key,
                                         JsonSnippet(value), RopeTypeName(p.rope_type)));
    }
  }

  // Layout: interleaved pairs for configs that say so (DeepSeek rope_interleave) and GPT-J-style families.
  const json* interleave = Get(config, "rope_interleave");
  // DeepSeek V2/V3 config classes default rope_interleave to true; an explicit value always wins. ChatGLM
  // rotates (2i, 2i+1) pairs (its cache stacks [cos, sin] on the last axis).
  const bool family_interleaved = mt == "gptj" || mt == "cohere" || mt.rfind("glm", 0) == 0 || chatglm ||
                                  mt == "deepseek_v2" || mt == "deepseek_v3";
  if (interleave && !interleave->is_boolean()) {
    throw ConfigError(fmt::format("rope_interleave must be true or false, got {}", JsonSnippet(*interleave)));
  }
  if (interleave ? interleave->get<bool>() : family_interleaved) out.layout = RopeLayout::kInterleaved;

  // Qwen-1 switches, applied by its model code past seq_length rather than by its RoPE table: said, not lost.
  for (const char* key : {"use_dynamic_ntk", "use_logn_attn"}) {
    const json* v = Get(config, key);
    if (v && v->is_boolean() && v->get<bool>()) {
      out.warnings.push_back(fmt::format(
          "{} = true (Qwen-1): its model code changes {} past seq_length; these frequencies are the base ones",
          key, std::string(key) == "use_dynamic_ntk" ? "the base by a stepwise NTK rule" : "the attention scale"));
    }
  }

  ValidateRopeParams(p);
  return out;
}

HfRopeConfig LoadHfRopeConfig(const std::string& path) {
  return ParseHfRopeConfig(LoadJsonFile(path, "config file"));
}

}  // namespace posenc
