// `posenc passkey`: passkey retrieval, the second metric of the context-extension papers (landmark attention,
// YaRN, LongRoPE, Self-Extend): a number hidden in filler text, asked for at the end, answered by greedy decoding.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/eval/training_record.h"
#include "posenc/model/config.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"
#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// The prompt's fixed lines, as the landmark-attention test (Mohtashami & Jaggi 2023, llama/run_test.py
/// `generate_prompt`) and YaRN's eval/passkey.py write them.
inline constexpr std::string_view kPasskeyTask =
    "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz you "
    "about the important information there.";
inline constexpr std::string_view kPasskeyFiller =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
inline constexpr std::string_view kPasskeyQuestion = "What is the pass key? The pass key is";
/// Keys are drawn uniformly from [1, kPasskeyMaxKey], as there (random.randint(1, 50000)).
inline constexpr int64_t kPasskeyMaxKey = 50000;

/// "The pass key is K. Remember it. K is the pass key." Errors: none.
std::string PasskeyKeyLine(int64_t key);

/// The first n_chars characters of the filler repeated without end, copies joined by one space (the source's
/// " ".join([garbage] * N)[:n]). Errors: RangeError if n_chars < 0.
std::string PasskeyFillerText(int64_t n_chars);

/// The five lines joined by "\n": task, filler[:prefix_chars], the key line, filler[:filler_chars -
/// prefix_chars], the question (both filler pieces start at the filler's beginning, as there).
/// Errors: RangeError unless 0 <= prefix_chars <= filler_chars.
std::string PasskeyPromptText(int64_t key, int64_t filler_chars, int64_t prefix_chars);

/// The filler characters before the key at depth d of n filler characters: round(d * n) (halves away from
/// zero). Errors: RangeError unless d is in [0, 1] and n >= 0.
int64_t PasskeyPrefixChars(int64_t filler_chars, double depth);

/// `trials` keys from one seed, in [1, kPasskeyMaxKey]: key t = 1 + floor(u_t * 50000) with u_t =
/// (x_t >> 11) * 2^-53 and x_t the t-th output of std::mt19937_64(seed) (the same on every platform). The same
/// keys serve every length, depth and method of a run, so their accuracies are paired.
/// Errors: RangeError if trials < 0.
std::vector<int64_t> PasskeyKeys(uint64_t seed, int64_t trials);

/// A prompt fitted to a token budget.
struct FittedPasskeyPrompt {
  std::string text;        // PasskeyPromptText(key, filler_chars, prefix_chars)
  std::vector<int> ids;    // tokenizer.Encode(text, add_bos)
  int64_t filler_chars = 0;
  int64_t prefix_chars = 0;
};

/// The prompt with the most filler whose tokens (BOS included when add_bos) number at most max_tokens, the key
/// at `depth` of the filler (PasskeyPrefixChars): filler_chars is found by bisection for the n with
/// tokens(n) <= max_tokens < tokens(n + 1) (token counts grow with the filler; where a longer filler happens to
/// tokenize shorter, bisection keeps the first such boundary it meets).
/// Errors: ConfigError if even the prompt without filler has more than max_tokens tokens (names both counts).
FittedPasskeyPrompt FitPasskeyPrompt(const Tokenizer& tokenizer, bool add_bos, int64_t max_tokens, int64_t key,
                                     double depth);

/// The first run of ASCII digits in `text` (the source's re.search(r'\d+', response); Python's \d also matches
/// other scripts' digits, which a pass key never holds). `complete` says whether a non-digit follows the run
/// (later text cannot change it). std::nullopt when `text` has no digit.
struct FirstInteger {
  std::string digits;
  bool complete = false;
};
std::optional<FirstInteger> FindFirstInteger(std::string_view text);

/// True when `digits` read as a decimal integer equals key (leading zeros allowed, as Python's int()).
bool SameInteger(std::string_view digits, int64_t key);

/// The greedy answer to one prompt.
struct PasskeyAnswer {
  std::vector<int> generated;  // the tokens chosen, in order (at most max_new_tokens)
  std::string response;        // tokenizer.Decode(generated)
  std::optional<std::string> answer;  // FindFirstInteger(response)'s digits
  bool correct = false;               // answer read as an integer equals the key
  int64_t forwards = 0;               // forward passes it took
};

/// Greedy decoding of up to max_new_tokens tokens after `prompt` (HF generate with do_sample=False: each token
/// the first maximum of the logits at its row; EOS ends the answer), stopped as soon as the first integer of the
/// response is complete, since later tokens cannot change it. Every forward pass covers the whole sequence at
/// positions 0, 1, ... with `rope` (so every RoPE method and position map of the eval applies). The expected
/// continuation `draft` (the key's tokens) is checked in the same pass: the model's argmax at each of its rows
/// is compared with it and the tokens are kept up to the first disagreement, whose argmax is the next token
/// (speculative decoding with the key as the draft: the tokens are exactly the greedy ones, one pass per
/// agreeing run instead of one per token).
/// Shapes: prompt [n] token ids, n + max_new_tokens <= the rows of `rope`'s tables.
/// Errors: ConfigError if the prompt is empty or max_new_tokens < 1; as Transformer::Forward (NumericError
///         naming the position when a logit is not finite).
PasskeyAnswer GreedyPasskeyAnswer(const Transformer& model, const ForwardRope& rope, const Tokenizer& tokenizer,
                                  std::span<const int> prompt, std::span<const int> draft, int64_t key,
                                  int64_t max_new_tokens, ForwardState& state);

/// The draft GreedyPasskeyAnswer checks: the tokens of prompt_text + " K." past the prompt's own tokens, when
/// the prompt's tokens are a prefix of them (else empty: no draft).
std::vector<int> PasskeyDraft(const Tokenizer& tokenizer, bool add_bos, const std::string& prompt_text,
                              std::span<const int> prompt_ids, int64_t key);

/// What to measure.
struct PasskeyOptions {
  std::string model_path;       // .gguf, Hugging Face folder or llama2.c .bin
  std::string tokenizer_path;   // empty: the model's own (LoadModelTokenizer)
  std::optional<TrainingRecord> training_record;  // the checkpoint's training report (FindTrainingRecord): its
                                                  // RoPE and L0 (ApplyTrainingRecordTo), before train_ctx
  std::optional<int64_t> train_ctx;  // overrides the file's training length L0, tokens
  WeightStorage weights = WeightStorage::kAuto;
  ComputePath compute = ComputePath::kF32;
  LoadOptions load;
  std::vector<int64_t> lengths;          // tokens of prompt plus answer; empty: L0, 2 L0, 4 L0
  std::vector<double> depths = {0.0, 0.25, 0.5, 0.75, 1.0};  // the key's place in the filler, 0 = first
  int64_t trials = 5;                    // prompts (keys) per (length, depth)
  std::vector<RopeMethod> methods = {RopeMethod::kNone, RopeMethod::kLinear, RopeMethod::kNtk, RopeMethod::kYarn};
  MethodOptions method_options;          // as eval's; each method scales by s = factor or max(1, length / L0)
  uint64_t seed = 1;                     // the keys (PasskeyKeys)
  int64_t max_new_tokens = 10;           // the answer's token budget (the source's max_new_tokens)
  int threads = 0;                       // OpenMP threads across trials; 0: all cores
  std::optional<bool> add_bos;           // BOS before the prompt; unset: as the tokenizer says
  const std::atomic<bool>* interrupt = nullptr;  // when it becomes true: PasskeyInterrupted after the current block
};

/// One trial: a prompt and its answer.
struct PasskeyTrial {
  int64_t key = 0;
  int64_t prompt_tokens = 0;  // BOS included
  int64_t filler_chars = 0;
  int64_t prefix_chars = 0;
  std::string response;
  std::optional<std::string> answer;
  bool correct = false;
};

/// One (length, depth, method) cell.
struct PasskeyRow {
  int64_t length = 0;
  double depth = 0.0;
  RopeMethod method = RopeMethod::kNone;
  double factor = 1.0;     // MethodRope::factor
  std::string parameters;  // a position-map method's parameters as used, else empty
  int64_t trials = 0;
  int64_t correct = 0;
  double accuracy = 0.0;   // correct / trials
  std::vector<PasskeyTrial> results;  // [trials], key order
  double seconds = 0.0;    // wall time of this (length, method) block shared by its depths
  int64_t forwards = 0;    // forward passes of this row's trials
};

/// The whole run.
struct PasskeyReport {
  std::string model_path, tokenizer_path;
  std::string model_summary;
  std::vector<std::string> model_warnings;
  std::string compute;        // DescribeCompute: the weight products' paths and kernels
  std::string compute_kinds;  // ComputeKinds ("int8+f32")
  ModelConfig config;
  bool add_bos = true;
  uint64_t seed = 0;
  int64_t max_new_tokens = 0;
  int threads = 1;
  std::vector<int64_t> lengths;
  std::vector<double> depths;
  std::vector<RopeMethod> methods;
  std::vector<int64_t> keys;
  YarnOptions yarn;              // the yarn parameters set (PasskeyOptions::method_options.yarn)
  std::vector<PasskeyRow> rows;  // length-major, then method, then depth
  bool complete = false;
};

/// Thrown by RunPasskey when PasskeyOptions::interrupt became true: the rows finished before were handed to
/// on_rows.
class PasskeyInterrupted : public Error {
 public:
  using Error::Error;
};

/// Loads the model and its tokenizer, checks every (length, method) pair (ValidateMethodRope at ctx = length,
/// the memory of a forward over `length` tokens per thread) before any work, then per length fits every
/// (depth, trial) prompt to length - max_new_tokens tokens (FitPasskeyPrompt; the answer's tokens then fit in
/// the length too, so a length of L0 never runs past L0) and per method answers them all
/// (GreedyPasskeyAnswer with BuildMethodRope(method, length)), across `threads` OpenMP threads (the results do
/// not depend on the count). After each (length, method) block on_rows(report, first, count) is called with
/// its new rows.
/// Differs from YaRN's eval/passkey.py in: the depth is set rather than drawn, and the length counts the
/// answer's tokens (there: the prompt's only).
/// Errors: ConfigError if lengths, depths or methods is empty, trials < 1, max_new_tokens < 1, a depth is
///   outside [0, 1], a length leaves no room for the prompt without filler, or the tokenizer has more ids than
///   the model; as LoadModelFile, LoadModelTokenizer, ValidateMethodRope, CheckEvalMemory and
///   GreedyPasskeyAnswer; PasskeyInterrupted.
PasskeyReport RunPasskey(const PasskeyOptions& options,
                         const std::function<void(const PasskeyReport&, size_t first, size_t count)>& on_rows = {});

/// Training text for a retrieval model: `documents` prompts, each with a key uniform in [1, kPasskeyMaxKey], the
/// key at a depth uniform in [0, 1], and a length uniform from the shortest that holds the prompt without filler
/// and answer_tokens up to max_tokens, fitted to length - answer_tokens (FitPasskeyPrompt, so a document is an
/// eval prompt of its length), then " K." (the answer and a full stop); documents are separated by lines
/// "<|endoftext|>" (posenc train's documents). All draws come from std::mt19937_64(seed); the text does not
/// depend on the thread count.
/// Errors: ConfigError if documents < 1, answer_tokens < 0, or max_tokens cannot hold a bare prompt and the
///   answer (names the counts).
std::string PasskeyTrainingText(const Tokenizer& tokenizer, bool add_bos, int64_t documents, int64_t max_tokens,
                                int64_t answer_tokens, uint64_t seed);

}  // namespace posenc
