// `posenc generate`: text from a llama2.c model with the KV cache, optionally under a RoPE scaling method.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "posenc/attention/kv_cache.h"
#include "posenc/eval/methods.h"

namespace posenc {

/// What to generate (defaults as llama2.c `run`, with a fixed seed so runs repeat).
struct GenerateOptions {
  std::string model_path;
  std::string tokenizer_path;
  std::string prompt;          // "" starts from BOS alone (llama2.c's default)
  int64_t steps = 256;         // positions forwarded, prompt included (llama2.c -n)
  float temperature = 1.0f;    // 0 = greedy
  float topp = 0.9f;           // nucleus sampling threshold; <= 0 or >= 1 samples from the whole softmax
  uint64_t seed = 42;          // xorshift seed
  EvalMethod method = EvalMethod::kNone;  // RoPE scaling, s = factor or max(1, steps / L0)
  MethodOptions method_options;
};

/// What was generated.
struct GenerateResult {
  std::vector<int> tokens;  // BOS, prompt tokens, then the sampled ones
  std::string text;         // decoded (BOS prints nothing; the piece after BOS loses its leading space)
  int64_t n_sampled = 0;    // tokens chosen by the sampler and kept (a sampled BOS ends the text)
  KvCacheMode cache_mode = KvCacheMode::kRotated;  // kUnrotated for "dynamic" (pre-rotation)
  double seconds = 0.0;
};

/// llama2.c `generate`: encode the prompt with BOS; forward one position at a time through the KV cache;
/// while inside the prompt the next token is the prompt's, then the sampler's; stop after `steps` positions
/// or when BOS is sampled. Each new piece is passed to on_piece as soon as it is known.
/// RoPE: static methods use one table (rotated cache); "dynamic-hf" rotates q and k of step p with the
/// dynamic-NTK frequencies for p + 1 tokens (rotated cache); "dynamic" keeps keys unrotated and rotates all of
/// them with step p's frequencies (pre-rotation).
/// Errors: ConfigError if steps < 1 or the sampler settings are invalid; as LoadCheckpoint, Llama2cTokenizer::Load,
///         BuildMethodRope.
/// Source: llama2.c run.c `generate`.
GenerateResult Generate(const GenerateOptions& options,
                        const std::function<void(const std::string& piece)>& on_piece = {});

}  // namespace posenc
