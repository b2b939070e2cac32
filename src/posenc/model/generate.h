// `posenc generate`: text from a llama2.c model with the KV cache, optionally under a RoPE scaling method.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/attention/kv_cache.h"
#include "posenc/model/loader.h"
#include "posenc/model/methods.h"

namespace posenc {

/// What to generate (defaults as llama2.c `run`, with a fixed seed so runs repeat).
struct GenerateOptions {
  std::string model_path;      // .gguf, Hugging Face folder or llama2.c .bin
  std::string tokenizer_path;  // empty: the model's own (LoadModelTokenizer)
  std::optional<int64_t> train_ctx;  // overrides the file's training length L0, tokens
  std::string prompt;          // "" starts from BOS alone (llama2.c's default)
  int64_t steps = 256;         // positions forwarded, prompt included (llama2.c -n)
  float temperature = 1.0f;    // 0 = greedy
  float topp = 0.9f;           // nucleus sampling threshold; <= 0 or >= 1 samples from the whole softmax
  uint64_t seed = 42;          // xorshift seed; 0 = from the clock, as llama2.c (GenerateResult::seed says which)
  RopeMethod method = RopeMethod::kNone;  // RoPE scaling, s = factor or max(1, steps / L0)
  MethodOptions method_options;
  LoadOptions load;            // how strict the loader is (unused tensors)
  bool parse_special = false;  // match special tokens written in the prompt (Tokenizer::set_parse_special)
};

/// What was generated.
struct GenerateResult {
  std::vector<int> tokens;  // BOS, prompt tokens, then the sampled ones
  std::string text;         // decoded (BOS prints nothing; the piece after BOS loses its leading space)
  int64_t n_sampled = 0;    // tokens chosen by the sampler and kept (a sampled BOS ends the text)
  int64_t prompt_tokens = 0;         // tokens of the encoded prompt (BOS not counted)
  int64_t prompt_tokens_unused = 0;  // prompt tokens past the last of `steps` positions (the prompt was cut)
  uint64_t seed = 0;                 // the xorshift seed used (the clock's when options.seed was 0)
  KvCacheMode cache_mode = KvCacheMode::kRotated;  // kUnrotated for "dynamic" (pre-rotation)
  double seconds = 0.0;
  std::string model_summary;  // SummaryLine of the model file
  std::vector<std::string> model_warnings;  // the loader's notes (ModelFile::warnings)
};

/// llama2.c `generate`: encode the prompt with BOS; forward one position at a time through the KV cache;
/// while inside the prompt the next token is the prompt's, then the sampler's; stop after `steps` positions
/// or when BOS or EOS is sampled. Each new piece is passed to on_piece as soon as it is known.
/// RoPE: static methods use one table (rotated cache); "dynamic-hf" rotates q and k of step p with the
/// dynamic-NTK frequencies for p + 1 tokens (rotated cache); "dynamic" keeps keys unrotated and rotates all of
/// them with step p's frequencies (pre-rotation).
/// A prompt longer than `steps` positions is cut (the result counts the unused prompt tokens).
/// Errors: ConfigError if steps < 1, if the prompt is empty and the vocabulary has no BOS, if the KV cache and RoPE tables for `steps` positions would need more than
///         the machine's memory (the message gives the bytes), or the sampler settings are invalid;
///         NumericError naming the step if a forward pass or the sampler meets NaN or infinity; as
///         LoadModelFile, LoadModelTokenizer, BuildMethodRope.
/// Source: llama2.c run.c `generate`.
GenerateResult Generate(const GenerateOptions& options,
                        const std::function<void(const std::string& piece)>& on_piece = {});

}  // namespace posenc
