// Pre-tokenization for byte-level BPE: the text is cut into words by a sequence of regex splits (PCRE2 with
// UTF and Unicode properties) before any merge; merges never cross a word boundary.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

/// What a split does with the pieces its pattern matches (Hugging Face tokenizers `SplitDelimiterBehavior`).
enum class SplitBehavior {
  kIsolated,            // matches and the text between them are all words ("Isolated")
  kRemoved,             // matches are dropped ("Removed")
  kMergedWithPrevious,  // a match joins the word before it ("MergedWithPrevious")
  kMergedWithNext,      // a match joins the word after it ("MergedWithNext")
  kContiguous,          // like isolated, but adjacent matches form one word ("Contiguous")
};

/// One step of a pre-tokenizer, applied to every word the previous steps produced.
struct PreTokenizerStep {
  enum class Kind {
    kSplit,        // split each word by `pattern` with `behavior` (and `invert`)
    kPrefixSpace,  // prepend " " to each word that does not start with one (ByteLevel add_prefix_space)
    kByteLevel,    // later steps see each word through the byte-level map (Hugging Face applies the
                   // ByteLevel pre-tokenizer's map in place, so a Digits or Split after it matches mapped text)
  };
  Kind kind = Kind::kSplit;
  std::string pattern;  // PCRE2 syntax, matched with PCRE2_UTF | PCRE2_UCP (\p{L}, \s, ... are Unicode)
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;  // the pattern matches the words to keep rather than the delimiters (HF Split invert)
};

/// A compiled pre-tokenizer: an ordered list of steps. Copies share the compiled patterns (immutable).
///
/// Invalid UTF-8: each byte that does not start a valid UTF-8 sequence (RFC 3629) is cut out as a word of its
/// own and passes no step; the valid runs between such bytes are pre-tokenized independently. No byte is
/// dropped. (Hugging Face tokenizers only take valid Unicode text; llama.cpp replaces such bytes by U+FFFD.)
class PreTokenizer {
 public:
  /// Compiles every pattern (JIT when the PCRE2 build has it).
  /// Errors: ConfigError naming `name`, the pattern and PCRE2's message and offset if a pattern does not
  /// compile, or if a kByteLevel step is followed by another kByteLevel or a kPrefixSpace step.
  PreTokenizer(std::vector<PreTokenizerStep> steps, std::string name);

  /// The words of `text` as raw bytes (never byte-level mapped), in order; their concatenation is `text`
  /// plus any prefix spaces the steps added, minus what kRemoved steps dropped. Empty words never appear.
  /// Errors: ConfigError naming the pattern and the byte offset if PCRE2 fails on the text (its match limit of
  /// 10^7 backtracking steps per call protects against catastrophic patterns).
  std::vector<std::string> Split(std::string_view text) const;

  /// Split without building the list: f(word) for each word in order. A word is a view that is valid only
  /// during the call. Errors: as Split.
  void ForEachWord(std::string_view text, const std::function<void(std::string_view)>& f) const;

  /// The name given (a GGUF tokenizer.ggml.pre value, "tokenizer.json", ...) and the steps as compiled (the
  /// whitespace-at-end pattern rewritten, trailing byte-level steps dropped).
  const std::string& name() const { return name_; }
  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  struct Compiled;
  std::string name_;
  std::vector<PreTokenizerStep> steps_;
  bool maps_bytes_ = false;  // some split runs on byte-level mapped text
  std::shared_ptr<const Compiled> compiled_;
};

/// The pre-tokenizer llama.cpp uses for a GGUF `tokenizer.ggml.pre` value: each name's regex list, every
/// regex an isolated split. Known: "default" (and an absent key), "gpt-2" / "gpt2" / "phi-2" / "gpt-neox" /
/// "mpt" / "olmo" (the GPT-2 regex), "llama-bpe" / "llama3" / "llama-v3" / "dbrx" / "smaug-bpe" (Llama 3),
/// "qwen2" / "stablelm2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder" / "refact" / "command-r" /
/// "smollm" / "codeshell" / "exaone", "poro-chat" / "bloom" / "gpt3-finnish", "chatglm-bpe", "viking".
/// Errors: ConfigError naming the value and listing the known ones.
/// Source: llama.cpp src/llama-vocab.cpp (`llm_tokenizer_bpe` regex_exprs and the `tokenizer_pre` names,
/// build b4748); the Llama 3 and Qwen2 lists use the original case-insensitive contractions `(?i:'s|...)`
/// of their tokenizer.json, which PCRE2 supports (llama.cpp spells them out for std::regex).
PreTokenizer GgufPreTokenizer(const std::string& pre);

/// The GPT-2 / ByteLevel(use_regex=true) pattern of Hugging Face tokenizers.
extern const char* const kGpt2Pattern;

}  // namespace posenc
