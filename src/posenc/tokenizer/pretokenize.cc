#include "posenc/tokenizer/pretokenize.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <deque>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/byte_level.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

// llama.cpp's lists (llm_tokenizer_bpe). The GPT-2 list there omits the final "|\s+" of the original pattern;
// both give the same words (a whitespace run not followed by non-space is taken by \s+(?!\S); any other is
// followed by a non-space and cut one character short, and its last character is taken by the next match).
constexpr const char* kGpt2Llama = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
constexpr const char* kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Letters of the Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic, Coptic, Deseret, Osage,
// Old Hungarian, Warang Citi and Adlam blocks (DeepSeek LLM's tokenizer.json, as llama.cpp copies it).
constexpr const char* kDeepseekLetters =
    "\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-"
    "\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481"
    "\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B"
    "\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B"
    "\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB"
    "\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128"
    "\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4"
    "\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF"
    "\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3"
    "\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF"
    "\U0001E900-\U0001E943]+";
constexpr const char* kDeepseekPunct = "\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+";
constexpr const char* kCjkHangul = "[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+";
constexpr const char* kPoro = R"( ?[^(\s|.,!?…。，、।۔،)]+)";

PreTokenizerStep Isolated(std::string pattern) {
  PreTokenizerStep s;
  s.pattern = std::move(pattern);
  return s;
}

std::vector<PreTokenizerStep> Isolated(std::initializer_list<const char*> patterns) {
  std::vector<PreTokenizerStep> steps;
  for (const char* p : patterns) steps.push_back(Isolated(p));
  return steps;
}

std::string Pcre2Message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return fmt::format("PCRE2 error {}", code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct PreTokenizer::Compiled {
  struct Code {
    pcre2_code* code = nullptr;
    ~Code() { pcre2_code_free(code); }
  };
  std::vector<std::unique_ptr<Code>> codes;  // [steps], null for non-split steps
};

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps, std::string name)
    : name_(std::move(name)), steps_(std::move(steps)) {
  // "\s+$" (DeepSeek LLM) backtracks through a whitespace run that does not end the word, and is retried at
  // every position of the run: quadratic time. Its leftmost match can only start where a run starts, and
  // backtracking never finds an end that the whole run missed ($ also matches before a final "\n", which the
  // greedy run already includes), so a run-start lookbehind and a possessive run give the same matches in one
  // linear pass.
  for (PreTokenizerStep& s : steps_) {
    if (s.kind == PreTokenizerStep::Kind::kSplit && s.pattern == R"(\s+$)") s.pattern = R"((?<!\s)\s++$)";
  }
  // A byte-level map with no split after it changes no boundary: it is dropped (words come back raw anyway).
  while (!steps_.empty() && steps_.back().kind == PreTokenizerStep::Kind::kByteLevel) steps_.pop_back();
  bool mapped = false;
  for (const PreTokenizerStep& s : steps_) {
    if (mapped && s.kind != PreTokenizerStep::Kind::kSplit) {
      throw ConfigError(fmt::format("pre-tokenizer '{}': only splits may follow a byte-level step", name_));
    }
    mapped = mapped || s.kind == PreTokenizerStep::Kind::kByteLevel;
  }
  maps_bytes_ = mapped;
  auto compiled = std::make_shared<Compiled>();
  for (const PreTokenizerStep& s : steps_) {
    if (s.kind != PreTokenizerStep::Kind::kSplit) {
      compiled->codes.push_back(nullptr);
      continue;
    }
    int error = 0;
    PCRE2_SIZE offset = 0;
    auto code = std::make_unique<Compiled::Code>();
    code->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(s.pattern.data()), s.pattern.size(),
                               PCRE2_UTF | PCRE2_UCP, &error, &offset, nullptr);
    if (code->code == nullptr) {
      throw ConfigError(fmt::format("pre-tokenizer '{}': pattern '{}' does not compile at offset {}: {}", name_,
                                    s.pattern, offset, Pcre2Message(error)));
    }
    pcre2_jit_compile(code->code, PCRE2_JIT_COMPLETE);  // no JIT in this PCRE2 build: the interpreter runs
    compiled->codes.push_back(std::move(code));
  }
  compiled_ = std::move(compiled);
}

namespace {

// Per-call PCRE2 state: match data sized for the pattern, a match context with a JIT stack.
class MatchState {
 public:
  MatchState() {
    context_ = pcre2_match_context_create(nullptr);
    jit_stack_ = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
    if (context_ == nullptr) throw std::bad_alloc();
    if (jit_stack_ != nullptr) pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
    match_data_ = pcre2_match_data_create(1, nullptr);
    if (match_data_ == nullptr) throw std::bad_alloc();
  }
  ~MatchState() {
    pcre2_match_data_free(match_data_);
    pcre2_jit_stack_free(jit_stack_);
    pcre2_match_context_free(context_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  // The first match of `code` in subject at or after `start`: true and [*begin, *end), or false if none.
  bool Find(const pcre2_code* code, std::string_view subject, size_t start, const std::string& pattern,
            size_t* begin, size_t* end) {
    const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(subject.data()), subject.size(), start,
                               PCRE2_NO_UTF_CHECK, match_data_, context_);
    if (rc == PCRE2_ERROR_NOMATCH) return false;
    if (rc < 0) {
      throw ConfigError(fmt::format("pre-tokenizer pattern '{}' failed on a {}-byte word at byte {}: {}",
                                    pattern, subject.size(), start, Pcre2Message(rc)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match_data_);
    *begin = ov[0];
    *end = ov[1];
    return true;
  }

 private:
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* jit_stack_ = nullptr;
  pcre2_match_data* match_data_ = nullptr;
};

// Splits one word by one pattern into `out` following `behavior`. The pieces are views into `word`: pieces that
// a behaviour joins are adjacent in it, so joining extends a view.
void SplitWord(std::string_view word, const pcre2_code* code, const PreTokenizerStep& step, MatchState& state,
               std::vector<std::string_view>& out) {
  // Segments [begin, end) with whether each is a delimiter (a match, or a non-match when inverted).
  struct Segment {
    size_t begin, end;
    bool delimiter;
  };
  thread_local std::vector<Segment> segments;
  segments.clear();
  size_t pos = 0, search = 0;
  while (search <= word.size()) {
    size_t b = 0, e = 0;
    if (!state.Find(code, word, search, step.pattern, &b, &e)) break;
    if (e == b) {  // an empty match delimits nothing; go on after the next character
      if (b >= word.size()) break;
      search = b + std::max<size_t>(1, ValidUtf8Length(word, b));
      continue;
    }
    if (b > pos) segments.push_back({pos, b, step.invert});
    segments.push_back({b, e, !step.invert});
    pos = search = e;
  }
  if (pos < word.size()) segments.push_back({pos, word.size(), step.invert});

  const size_t first = out.size();  // this word's pieces start here
  auto extend_back = [&](const Segment& s) {
    std::string_view& last = out.back();
    last = std::string_view(last.data(), static_cast<size_t>(word.data() + s.end - last.data()));
  };
  if (step.behavior == SplitBehavior::kMergedWithNext) {
    // As Hugging Face: from the right, a delimiter joins the piece after it unless that piece is a delimiter.
    bool next_is_delimiter = false;
    for (size_t k = segments.size(); k-- > 0;) {
      const Segment& s = segments[k];
      if (s.delimiter && !next_is_delimiter && out.size() > first) {
        std::string_view& joined = out.back();
        joined = std::string_view(word.data() + s.begin, joined.size() + (s.end - s.begin));
      } else {
        out.push_back(word.substr(s.begin, s.end - s.begin));
      }
      next_is_delimiter = s.delimiter;
    }
    std::reverse(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
    return;
  }
  bool last_was_delimiter = false;
  for (const Segment& s : segments) {
    switch (step.behavior) {
      case SplitBehavior::kIsolated:
        out.push_back(word.substr(s.begin, s.end - s.begin));
        break;
      case SplitBehavior::kRemoved:
        if (!s.delimiter) out.push_back(word.substr(s.begin, s.end - s.begin));
        break;
      case SplitBehavior::kContiguous:
        if (s.delimiter && last_was_delimiter) {
          extend_back(s);
        } else {
          out.push_back(word.substr(s.begin, s.end - s.begin));
        }
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (s.delimiter && !last_was_delimiter && out.size() > first) {
          extend_back(s);
        } else {
          out.push_back(word.substr(s.begin, s.end - s.begin));
        }
        break;
      case SplitBehavior::kMergedWithNext:
        break;  // handled above
    }
    last_was_delimiter = s.delimiter;
  }
}

}  // namespace

void PreTokenizer::ForEachWord(std::string_view text, const std::function<void(std::string_view)>& f) const {
  if (text.empty()) return;
  thread_local MatchState state;  // PCRE2 match data and JIT stack, reused by every call on this thread
  const ByteLevelMap& map = ByteLevelMap::Get();
  std::vector<std::string_view> words, next;
  std::deque<std::string> made;  // words the steps create (prefix spaces, the byte-level map); stable addresses
  std::string raw;
  auto run_steps = [&](std::string_view run) {
    words.assign(1, run);
    made.clear();
    for (size_t k = 0; k < steps_.size(); ++k) {
      const PreTokenizerStep& step = steps_[k];
      next.clear();
      for (std::string_view w : words) {
        if (step.kind == PreTokenizerStep::Kind::kPrefixSpace) {
          if (!w.empty() && w[0] == ' ') {
            next.push_back(w);
          } else {
            std::string& spaced = made.emplace_back(1, ' ');
            spaced += w;
            next.push_back(spaced);
          }
        } else if (step.kind == PreTokenizerStep::Kind::kByteLevel) {
          made.push_back(map.Encode(w));
          next.push_back(made.back());
        } else {
          SplitWord(w, compiled_->codes[k]->code, step, state, next);
        }
      }
      words.swap(next);
    }
    for (std::string_view w : words) {
      if (w.empty()) continue;
      if (maps_bytes_) {
        // Splits after the map cut at character boundaries of the mapped text: each word maps back whole.
        raw.clear();
        map.Decode(w, raw);
        f(raw);
      } else {
        f(w);
      }
    }
  };
  // Valid UTF-8 runs go through the steps; each invalid byte is a word of its own.
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t valid = ValidUtf8Prefix(text.substr(pos));
    if (valid > 0) run_steps(text.substr(pos, valid));
    pos += valid;
    if (pos < text.size()) f(text.substr(pos++, 1));
  }
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  std::vector<std::string> words;
  ForEachWord(text, [&](std::string_view w) { words.emplace_back(w); });
  return words;
}

PreTokenizer GgufPreTokenizer(const std::string& pre) {
  std::vector<PreTokenizerStep> steps;
  if (pre.empty() || pre == "default") {
    steps = Isolated({R"([\p{P}\$\+<=>\^~\|]+)", kGpt2Llama, R"(\p{N}+)", "[0-9][0-9][0-9]"});
  } else if (pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "gpt-neox" || pre == "mpt" ||
             pre == "olmo") {
    steps = Isolated({kGpt2Llama});
  } else if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3" || pre == "dbrx" || pre == "smaug-bpe" ||
             pre == "chatglm-bpe") {
    steps = Isolated({kLlama3});
  } else if (pre == "qwen2" || pre == "stablelm2") {
    steps = Isolated({kQwen2});
  } else if (pre == "deepseek-llm") {
    steps = Isolated({"[\r\n]", kDeepseekLetters, kDeepseekPunct, R"(\s+$)", kCjkHangul, R"(\p{N}+)"});
  } else if (pre == "deepseek-coder") {
    steps = Isolated({"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"});
  } else if (pre == "falcon") {
    steps = Isolated({R"([\p{P}\$\+<=>\^~\|`]+)", kGpt2Llama, "[0-9][0-9][0-9]"});
  } else if (pre == "starcoder" || pre == "refact" || pre == "command-r" || pre == "smollm" || pre == "codeshell" ||
             pre == "exaone") {
    steps = Isolated({R"(\p{N})", kGpt2Llama});
  } else if (pre == "poro-chat" || pre == "bloom" || pre == "gpt3-finnish") {
    steps = Isolated({kPoro});
  } else if (pre == "viking") {
    steps = Isolated({kPoro, R"(\p{N})"});
  } else {
    throw ConfigError(fmt::format(
        "tokenizer.ggml.pre '{}' is not a known pre-tokenizer (known: default, gpt-2, gpt2, phi-2, gpt-neox, mpt, "
        "olmo, llama-bpe, llama3, llama-v3, dbrx, smaug-bpe, chatglm-bpe, qwen2, stablelm2, deepseek-llm, "
        "deepseek-coder, falcon, starcoder, refact, command-r, smollm, codeshell, exaone, poro-chat, bloom, "
        "gpt3-finnish, viking)",
        pre));
  }
  return PreTokenizer(std::move(steps), pre.empty() ? "default" : pre);
}

}  // namespace posenc
