// What an eval-style run (posenc eval, posenc passkey) checks and loads before its work: the memory of its
// forward passes, the model with its training record, and a tokenizer whose ids fit the model.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/eval/training_record.h"
#include "posenc/model/config.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"
#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// Proves that forward passes over windows of L tokens fit the machine's memory: per thread the forward state
/// (residual, q, k, v, attention output, FFN buffers: 2 dim + 4 q_dim + 4 kv_dim + 2 hidden_dim floats per
/// token) and the logits of up to 256 positions; once, the cos/sin table (L x head_dim floats), and for dynamic
/// NTK's pre-rotation the tables of every query row (L x (L + 8) x head_dim floats). Context-parallel
/// (cp_ranks > 0): one thread per rank holding at most 2 ceil(L / 2 cp_ranks) positions plus the ring's two K/V
/// blocks (4 kv_dim floats per position). Everything times ranks_here (the ranks sharing this machine).
/// `field` names the length in the message ("`ctx`").
/// Errors: ConfigError from RequireMemory naming "<field> = L with T threads", the bytes and what they hold.
void CheckEvalMemory(int64_t L, int threads, bool pre_rotation, const ModelConfig& config, int ranks_here = 1,
                     int cp_ranks = 0, std::string_view field = "`ctx`");

/// The methods of a run (the rows of every length): at least one, none listed twice.
/// Errors: ConfigError "`methods` must list at least one method, got none" or "`methods`
///   lists 'none' twice".
void CheckMethodList(const std::vector<RopeMethod>& methods);

/// The run's model: Transformer::Load(path, weights, compute, load), then the checkpoint's training record when
/// given (ApplyTrainingRecordTo: its RoPE and L0), then L0 = train_ctx when set (Transformer::SetTrainCtx). The
/// record's notes are appended to `notes`.
/// Errors: as Transformer::Load, ApplyTrainingRecordTo and SetTrainCtx.
Transformer LoadRunModel(const std::string& path, WeightStorage weights, ComputePath compute, const LoadOptions& load,
                         const std::optional<TrainingRecord>& record, const std::optional<int64_t>& train_ctx,
                         std::vector<std::string>& notes);

/// The run's tokenizer: LoadModelTokenizer(model_path, tokenizer_path, parse_special), refused when its ids would
/// index past the model's embedding table of vocab_size rows; its notes are appended to `notes`, each as
/// "tokenizer: ...".
/// Errors: as LoadModelTokenizer; ConfigError "tokenizer '<tokenizer_path, or model_path>' has <n> tokens but the
///   model's vocab_size is <v>: ...".
std::unique_ptr<Tokenizer> LoadRunTokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                            bool parse_special, int64_t vocab_size, std::vector<std::string>& notes);

}  // namespace posenc
