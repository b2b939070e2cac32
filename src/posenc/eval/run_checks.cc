#include "posenc/eval/run_checks.h"

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/tokenizer/load.h"

namespace posenc {

void CheckEvalMemory(int64_t L, int threads, bool pre_rotation, const ModelConfig& c, int ranks_here,
                     int cp_ranks, std::string_view field) {
  const int64_t half = c.head_dim / 2;
  int64_t per_token = 2 * c.dim + 4 * c.q_dim() + 4 * c.kv_dim() + 2 * c.hidden_dim;  // floats
  int64_t tokens = L;
  if (cp_ranks > 0) {
    tokens = std::min<int64_t>(L, 2 * ((L + 2 * cp_ranks - 1) / (2 * cp_ranks)));
    per_token += 4 * c.kv_dim();
    threads = 1;
  }
  const int64_t per_thread = SaturatingAdd(SaturatingMul(tokens, per_token),
                                           SaturatingMul(std::min<int64_t>(tokens, 256), c.vocab_size));
  int64_t bytes = SaturatingMul(per_thread, 4 * static_cast<int64_t>(threads));
  bytes = SaturatingAdd(bytes, SaturatingMul(L, 2 * half * 4));
  if (pre_rotation) bytes = SaturatingAdd(bytes, SaturatingMul(SaturatingMul(L, L + 8), 2 * half * 4));
  bytes = SaturatingMul(bytes, ranks_here);
  const std::string who = cp_ranks > 0 ? fmt::format("split over {} ranks", cp_ranks)
                                       : fmt::format("with {} thread{}", threads, threads == 1 ? "" : "s");
  RequireMemory(bytes,
                fmt::format("{} = {} {}{}", field, L, who,
                            ranks_here > 1 ? fmt::format(", {} ranks on this machine", ranks_here) : ""),
                fmt::format("activations of {} floats per token for {} tokens and logits of up to 256 positions per "
                            "thread{}{}", per_token, tokens,
                            pre_rotation ? ", and dynamic's per-row tables of L x L x head_dim floats" : "",
                            ranks_here > 1 ? ", per rank" : ""));
}

void CheckMethodList(const std::vector<RopeMethod>& methods) {
  if (methods.empty()) throw ConfigError("`methods` must list at least one method, got none");
  for (size_t i = 0; i < methods.size(); ++i) {
    if (std::find(methods.begin(), methods.begin() + static_cast<std::ptrdiff_t>(i), methods[i]) !=
        methods.begin() + static_cast<std::ptrdiff_t>(i)) {
      throw ConfigError(fmt::format("`methods` lists '{}' twice", RopeMethodName(methods[i])));
    }
  }
}

Transformer LoadRunModel(const std::string& path, WeightStorage weights, ComputePath compute, const LoadOptions& load,
                         const std::optional<TrainingRecord>& record, const std::optional<int64_t>& train_ctx,
                         std::vector<std::string>& notes) {
  Transformer model = Transformer::Load(path, weights, compute, load);
  if (record) {
    const std::vector<std::string> applied = ApplyTrainingRecordTo(*record, path, model);
    notes.insert(notes.end(), applied.begin(), applied.end());
  }
  if (train_ctx) model.SetTrainCtx(*train_ctx);
  return model;
}

std::unique_ptr<Tokenizer> LoadRunTokenizer(const std::string& model_path, const std::string& tokenizer_path,
                                            bool parse_special, int64_t vocab_size, std::vector<std::string>& notes) {
  std::unique_ptr<Tokenizer> tokenizer = LoadModelTokenizer(model_path, tokenizer_path, parse_special);
  if (tokenizer->vocab_size() > vocab_size) {
    throw ConfigError(fmt::format("tokenizer '{}' has {} tokens but the model's vocab_size is {}: its ids would "
                                  "index past the embedding table",
                                  tokenizer_path.empty() ? model_path : tokenizer_path, tokenizer->vocab_size(),
                                  vocab_size));
  }
  for (const std::string& note : tokenizer->notes()) notes.push_back("tokenizer: " + note);
  return tokenizer;
}

}  // namespace posenc
