// Hugging Face config.json -> RopeParams (rope_scaling / rope_parameters, v4 and v5 spellings).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "posenc/rope/apply.h"
#include "posenc/rope/params.h"

namespace posenc {

/// What a model config says about its rotary embedding.
struct HfRopeConfig {
  RopeParams params;                  // standardised and validated
  RopeLayout layout = RopeLayout::kHalfSplit;  // kInterleaved: rope_interleave true, or model_type gptj, cohere,
                                               // glm*, deepseek_v2/v3 without rope_interleave false
  std::vector<std::string> warnings;  // keys that were present but unused, and defaults that were applied
};

/// Reads the rope fields of a Hugging Face `config.json` object, with transformers v5
/// `standardize_rope_params` semantics:
///   - `rope_parameters` (v5) or `rope_scaling` (v4); both present must agree; `rope_type` or legacy `type`
///     (both present must agree); absent -> "default".
///   - `rope_theta`: inside rope_parameters or top level (both present must agree); absent -> 10000 with a
///     warning (HF's default_theta).
///   - head_dim: `head_dim` if non-zero, else `qk_rope_head_dim` (DeepSeek MLA), else hidden_size /
///     num_attention_heads.
///   - rotary_dim: `rotary_dim` if given, else int(head_dim * f) with f = `partial_rotary_factor` (in
///     rope_parameters or top level) or `rotary_pct` (GPT-NeoX), default 1.0 (0.5 for model_type glm*).
///   - original_max_position_embeddings: for longrope the top-level value wins (Phi-3), then the one inside
///     rope_parameters; for yarn and llama3 only the one inside rope_parameters / rope_scaling is read (as
///     transformers' init functions do); absent: max_position_embeddings (noted).
///   - rope_parameters nested per layer type ({"full_attention": {...}, "sliding_attention": {...}}, with
///     `layer_types`): the entry of `layer_type` is read as if it were the flat rope_parameters.
///   - yarn / longrope factor absent -> max_position_embeddings / original_max_position_embeddings.
/// Errors: ConfigError naming the field and value for nested rope_parameters without `layer_type` (the message
///   lists the types) or without an entry for it; a missing required key (head_dim not derivable,
///   factor for linear/dynamic/llama3/ntk, llama3 low/high_freq_factor, longrope factor lists), a value of
///   the wrong JSON type, conflicting duplicates, an unknown rope_type, and everything ValidateRopeParams
///   rejects.
/// Source: transformers `modeling_rope_utils.py` v5 (`RotaryEmbeddingConfigMixin.standardize_rope_params`,
///   `validate_rope`).
HfRopeConfig ParseHfRopeConfig(const nlohmann::json& config,
                               const std::optional<std::string>& layer_type = std::nullopt);

/// The layer types of a config whose rope_parameters are nested per layer type, in the file's order; empty for
/// a flat config. Errors: ConfigError if flat keys and per-type objects are mixed.
std::vector<std::string> NestedRopeLayerTypes(const nlohmann::json& config);

/// Reads and parses a config.json file. Errors: IoError if unreadable or not JSON; as ParseHfRopeConfig.
HfRopeConfig LoadHfRopeConfig(const std::string& path);

}  // namespace posenc
