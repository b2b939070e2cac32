// JSON <-> TrainShape (the model shape of `posenc train --config model.json`).
#pragma once

#include <nlohmann/json.hpp>

#include "posenc/train/config.h"

namespace posenc {

/// Reads a model config from a JSON object with the keys dim, hidden_dim, n_layers, n_heads, n_kv_heads,
/// vocab_size, max_seq_len (integers, required), head_dim (integer, default 0: dim / n_heads), norm_eps (number,
/// default 1e-5), attention_bias, tied_embeddings, qk_norm (booleans, defaults false, true and false) and
/// position_encoding ("rope" | "sinusoidal" | "learned" | "none", default "rope").
/// Errors: ConfigError naming the key if j is not an object, a required key is missing, a value has the wrong
///         JSON type or is not an exact integer where one is needed, a key is unknown (a typo would otherwise be
///         ignored), or ValidateTrainShape rejects the result.
TrainShape TrainShapeFromJson(const nlohmann::json& j);

/// The same keys, every one written but qk_norm (written when true).
nlohmann::json TrainShapeToJson(const TrainShape& config);

}  // namespace posenc
