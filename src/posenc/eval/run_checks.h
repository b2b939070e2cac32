// Checks an eval-style run makes before its work: the memory of its forward passes, and that a tokenizer's ids
// fit the model (posenc eval and posenc passkey).
#pragma once

#include <cstdint>
#include <string_view>

#include "posenc/model/config.h"
#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// Proves that forward passes over windows of L tokens fit the machine's memory: per thread the forward state
/// (residual, q, k, v, attention output, FFN buffers: 2 dim + 4 q_dim + 4 kv_dim + 2 hidden_dim floats per
/// token) and the logits of up to 256 positions; once, the cos/sin table (L x head_dim floats), and for dynamic
/// NTK's pre-rotation the tables of every query row (L x (L + 8) x head_dim floats). Context-parallel
/// (cp_ranks > 0): one thread per rank holding at most 2 ceil(L / 2 cp_ranks) positions plus the ring's two K/V
/// blocks (4 kv_dim floats per position). Everything times ranks_here (the ranks sharing this machine).
/// `field` names the length in the message ("ctx (--ctx)").
/// Errors: ConfigError from RequireMemory naming "<field> = L with T threads", the bytes and what they hold.
void CheckEvalMemory(int64_t L, int threads, bool pre_rotation, const ModelConfig& config, int ranks_here = 1,
                     int cp_ranks = 0, std::string_view field = "ctx (--ctx)");

/// Refuses a tokenizer whose ids would index past the model's embedding table.
/// Errors: ConfigError "tokenizer '<name>' has <n> tokens but the model's vocab_size is <v>: ...".
void CheckTokenizerFitsModel(const Tokenizer& tokenizer, std::string_view name, int64_t vocab_size);

}  // namespace posenc
