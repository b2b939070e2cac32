#include "posenc/model/generate.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <numeric>

#include <fmt/format.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/model/sampler.h"
#include "posenc/tokenizer/load.h"
#include "posenc/model/transformer.h"

namespace posenc {

namespace {

// Memory a run of `steps` positions allocates up front: the KV cache (keys and values, every layer), the
// RoPE table and position ids over [0, steps), and per-step tables for pre-rotation.
void CheckStepsMemory(int64_t steps, const ModelConfig& c, bool pre_rotation) {
  const int64_t half = c.head_dim / 2;
  int64_t per_step = SaturatingMul(SaturatingMul(2 * c.n_layers, c.kv_dim()), 4);  // K and V, float32
  per_step = SaturatingAdd(per_step, SaturatingMul(2 * half, pre_rotation ? 16 : 8));  // cos + sin tables
  per_step = SaturatingAdd(per_step, 8 + 4);                                          // position id, token
  RequireMemory(SaturatingMul(steps, per_step), fmt::format("`steps` = {}", steps),
                fmt::format("{} bytes per position: a KV cache of 2 x {} layers x kv_dim {} floats, RoPE tables "
                            "and ids",
                            per_step, c.n_layers, c.kv_dim()));
}

}  // namespace

GenerateResult Generate(const GenerateOptions& options, const std::function<void(const std::string&)>& on_piece) {
  if (options.steps < 1) throw ConfigError(fmt::format("steps must be >= 1, got {}", options.steps));
  if (IsPositionMap(options.method)) {
    throw ConfigError(fmt::format("method '{}' is a position map, which eval's prefill runs; generation decodes "
                                  "with a KV cache, which has none", RopeMethodName(options.method)));
  }
  const auto t0 = std::chrono::steady_clock::now();
  Transformer model = Transformer::Load(options.model_path, WeightStorage::kAuto, ComputePath::kF32, options.load);
  if (options.train_ctx) model.SetTrainCtx(*options.train_ctx);
  GenerateResult result;
  result.model_summary = SummaryLine(model.summary());
  result.model_warnings = model.warnings();
  const ModelConfig& c = model.config();
  const bool pre_rotation = options.method == RopeMethod::kDynamic;
  CheckStepsMemory(options.steps, c, pre_rotation);
  const std::unique_ptr<Tokenizer> tokenizer =
      LoadModelTokenizer(options.model_path, options.tokenizer_path, options.parse_special);
  for (const std::string& note : tokenizer->notes()) result.model_warnings.push_back("tokenizer: " + note);
  if (tokenizer->vocab_size() > c.vocab_size) {
    throw ConfigError(fmt::format("tokenizer '{}' has {} tokens but the model's vocab_size is {}",
                                  options.tokenizer_path.empty() ? options.model_path : options.tokenizer_path,
                                  tokenizer->vocab_size(), c.vocab_size));
  }
  // llama2.c: a seed of 0 means "seed from the clock" ((unsigned int)time(NULL)); the seed used is reported.
  result.seed =
      options.seed != 0 ? options.seed : static_cast<uint64_t>(static_cast<unsigned int>(std::time(nullptr)));
  if (result.seed == 0) result.seed = 1;
  Sampler sampler(options.temperature, options.topp, result.seed);
  SetBlasThreads(1);  // decode multiplies [<= 512, 64] matrices by one vector: BLAS threads only cost here

  // RoPE tables over positions [0, steps): row p is what step p uses (see MethodRope). "dynamic" rotates every
  // cached key with its step's frequencies: each step builds that step's tables (BuildDynamicStepRope).
  ValidateMethodRope(options.method, options.steps, c, options.method_options);
  const MethodRope rope = BuildMethodRope(pre_rotation ? RopeMethod::kNone : options.method, options.steps, c,
                                          options.method_options);
  const ForwardRope static_rope = rope.forward();
  result.cache_mode = pre_rotation ? KvCacheMode::kUnrotated : KvCacheMode::kRotated;
  KvCache cache(result.cache_mode, c.n_layers, options.steps, c.n_kv_heads, c.head_dim);
  RequireBlasWorkspace(1, "generate", "");  // one thread multiplies; under ulimit -v OpenBLAS would hang without room
  ForwardState state;
  std::vector<float> logits(static_cast<size_t>(c.vocab_size));

  const bool bos = tokenizer->bos_id() >= 0;
  const std::vector<int> prompt = tokenizer->Encode(options.prompt, bos, /*add_eos=*/false);
  if (prompt.empty()) {
    throw ConfigError("generate needs a first token: the prompt is empty and the vocabulary has no BOS token");
  }
  result.prompt_tokens = static_cast<int64_t>(prompt.size()) - (bos ? 1 : 0);
  result.prompt_tokens_unused = std::max<int64_t>(0, result.prompt_tokens - options.steps);
  int token = prompt[0];
  result.tokens.push_back(token);
  for (int64_t pos = 0; pos < options.steps; ++pos) {
    MethodRope step;
    if (pre_rotation) step = BuildDynamicStepRope(pos + 1, c, options.method_options);  // YaRN paper Sec. 3.3
    try {
      model.DecodeStep(token, pos, pre_rotation ? step.forward() : static_rope, cache, state, logits.data());
    } catch (const NumericError& e) {
      throw NumericError(fmt::format("generate step {}: {}", pos, e.what()));
    }
    const bool in_prompt = pos + 1 < static_cast<int64_t>(prompt.size());
    int next;
    if (in_prompt) {
      next = prompt[static_cast<size_t>(pos + 1)];
    } else {
      try {
        next = sampler.Sample(logits);
      } catch (const NumericError& e) {
        throw NumericError(fmt::format("generate step {}: {}", pos, e.what()));
      }
    }
    // llama2.c: BOS delimits sequences; EOS ends one.
    if (!in_prompt && (next == tokenizer->bos_id() || next == tokenizer->eos_id())) break;
    if (!in_prompt) ++result.n_sampled;
    result.tokens.push_back(next);
    // The new piece: the decoded text grows by it (Decode concatenates the pieces' bytes).
    const std::string text = tokenizer->Decode(result.tokens);
    const std::string piece = text.size() >= result.text.size() ? text.substr(result.text.size()) : std::string();
    result.text = text;
    if (on_piece) on_piece(piece);
    token = next;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace posenc
