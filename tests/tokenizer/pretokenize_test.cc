// Pre-tokenizers: the GPT-2 regex's words on known strings, the split behaviours, invalid UTF-8, every
// llama.cpp pre-tokenizer name, and what must be an error rather than a hang.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/pretokenize.h"

namespace posenc {
namespace {

using Words = std::vector<std::string>;

PreTokenizer One(const std::string& pattern, SplitBehavior behavior = SplitBehavior::kIsolated, bool invert = false) {
  PreTokenizerStep s;
  s.pattern = pattern;
  s.behavior = behavior;
  s.invert = invert;
  return PreTokenizer({s}, "test");
}

std::string Join(const Words& w) {
  std::string s;
  for (const std::string& x : w) s += x;
  return s;
}

TEST(PreTokenizeTest, Gpt2Words) {
  const PreTokenizer gpt2 = GgufPreTokenizer("gpt-2");
  // Contractions, a space kept with the word after it, digits apart from letters, a whitespace run ending
  // before a word leaving its last space to that word.
  EXPECT_EQ(gpt2.Split("Hello world's  123abc!!"),
            (Words{"Hello", " world", "'s", " ", " 123", "abc", "!!"}));
  EXPECT_EQ(gpt2.Split("\n\n\tx"), (Words{"\n\n", "\t", "x"}));
  EXPECT_EQ(gpt2.Split("   "), (Words{"   "}));
  EXPECT_EQ(gpt2.Split("нещо на"), (Words{"нещо", " на"}));  // \p{L} is Unicode
  EXPECT_TRUE(gpt2.Split("").empty());
  // HF's own ByteLevel pattern (with the final "|\s+") gives the same words.
  const PreTokenizer hf = One(kGpt2Pattern);
  for (const std::string s : {"Hello world's  123abc!!", "\n\n\tx", " \t \n x  y  ", "a  \t1"}) {
    EXPECT_EQ(hf.Split(s), gpt2.Split(s)) << s;
  }
}

TEST(PreTokenizeTest, Llama3AndQwen2Differ) {
  // Llama 3 groups up to three digits, Qwen2 one; both take contractions case-insensitively.
  EXPECT_EQ(GgufPreTokenizer("llama-bpe").Split("12345 I'M"), (Words{"123", "45", " I", "'M"}));
  EXPECT_EQ(GgufPreTokenizer("qwen2").Split("123 I'M"), (Words{"1", "2", "3", " I", "'M"}));
}

TEST(PreTokenizeTest, Behaviours) {
  EXPECT_EQ(One("-", SplitBehavior::kIsolated).Split("a-b--c"), (Words{"a", "-", "b", "-", "-", "c"}));
  EXPECT_EQ(One("-", SplitBehavior::kRemoved).Split("a-b--c"), (Words{"a", "b", "c"}));
  EXPECT_EQ(One("-", SplitBehavior::kContiguous).Split("a-b--c"), (Words{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(One("-", SplitBehavior::kMergedWithPrevious).Split("a-b--c"), (Words{"a-", "b-", "-", "c"}));
  EXPECT_EQ(One("-", SplitBehavior::kMergedWithNext).Split("a-b--c"), (Words{"a", "-b", "-", "-c"}));
  EXPECT_EQ(One("-", SplitBehavior::kMergedWithNext).Split("a-"), (Words{"a", "-"}));
  // invert: the pattern matches the words, the rest is the delimiter.
  EXPECT_EQ(One(R"(\w+)", SplitBehavior::kRemoved, true).Split("ab, cd!"), (Words{"ab", "cd"}));
  // An empty match delimits nothing.
  EXPECT_EQ(One("x*").Split("abxc"), (Words{"ab", "x", "c"}));
  PreTokenizerStep prefix;
  prefix.kind = PreTokenizerStep::Kind::kPrefixSpace;
  EXPECT_EQ(PreTokenizer({prefix}, "p").Split("a"), (Words{" a"}));
  EXPECT_EQ(PreTokenizer({prefix}, "p").Split(" a"), (Words{" a"}));
}

TEST(PreTokenizeTest, SplitsAfterTheByteLevelMapSeeMappedText) {
  // After the map, a space is "Ġ" (a letter) and byte 0xBD of "½" is "½" itself (a number): Hugging Face's
  // Digits after ByteLevel cuts "½" = C2 BD between its two bytes.
  PreTokenizerStep map, digits;
  map.kind = PreTokenizerStep::Kind::kByteLevel;
  digits.pattern = R"(\p{N}+)";
  const PreTokenizer after({map, digits}, "after");
  EXPECT_EQ(after.Split("a\xC2\xBD"), (Words{"a\xC2", "\xBD"}));  // words come back as raw bytes
  const PreTokenizer before({digits}, "before");
  EXPECT_EQ(before.Split("a\xC2\xBD"), (Words{"a", "\xC2\xBD"}));
  PreTokenizerStep prefix;
  prefix.kind = PreTokenizerStep::Kind::kPrefixSpace;
  EXPECT_THROW(PreTokenizer({map, prefix}, "bad"), ConfigError);
}

TEST(PreTokenizeTest, InvalidUtf8BytesAreWordsOfTheirOwn) {
  const PreTokenizer gpt2 = GgufPreTokenizer("gpt-2");
  EXPECT_EQ(gpt2.Split("ab\xFF" "cd"), (Words{"ab", "\xFF", "cd"}));
  EXPECT_EQ(gpt2.Split("\xC3"), (Words{"\xC3"}));
  EXPECT_EQ(gpt2.Split(" x\xED\xA0\x80y"), (Words{" x", "\xED", "\xA0", "\x80", "y"}));  // a surrogate
  const std::string mixed = "a\x80 b\xC3\xA9\xF5 c \xF0\x9F\x99\x82\xFF";
  EXPECT_EQ(Join(gpt2.Split(mixed)), mixed);
}

TEST(PreTokenizeTest, EveryKnownNameCompilesAndKeepsEveryByte) {
  const std::string text =
      "Hello, y'all! How are you 😁 ?我想在apple工作1314151天～ \n\n ½ 3333 Führer   \t нещо 1.5e3 <tag> ‘x’";
  for (const char* name :
       {"default", "gpt-2", "gpt2", "phi-2", "gpt-neox", "mpt", "olmo", "llama-bpe", "llama3", "llama-v3", "dbrx",
        "smaug-bpe", "chatglm-bpe", "qwen2", "stablelm2", "deepseek-llm", "deepseek-coder", "falcon", "starcoder",
        "refact", "command-r", "smollm", "codeshell", "exaone"}) {
    const Words w = GgufPreTokenizer(name).Split(text);
    EXPECT_EQ(Join(w), text) << name;
    for (const std::string& x : w) EXPECT_FALSE(x.empty()) << name;
  }
  // BLOOM-style patterns drop nothing either: their unmatched text is kept as words.
  EXPECT_EQ(Join(GgufPreTokenizer("bloom").Split(text)), text);
  EXPECT_EQ(Join(GgufPreTokenizer("viking").Split(text)), text);
  EXPECT_EQ(GgufPreTokenizer("").name(), "default");
  try {
    GgufPreTokenizer("no-such-pre");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'no-such-pre' is not a known pre-tokenizer"), std::string::npos);
  }
}

TEST(PreTokenizeTest, BadPatternsAndRunawayMatchesAreErrors) {
  try {
    One("(unclosed");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("(unclosed"), std::string::npos) << e.what();
  }
  // Catastrophic backtracking stops at PCRE2's match limit with an error naming the pattern, never a hang.
  EXPECT_THROW(One("(a+)+$").Split(std::string(40, 'a') + "b"), ConfigError);
}

TEST(PreTokenizeTest, LongWhitespaceRunsStayLinear) {
  // DeepSeek LLM's "\s+$" is retried at every position of a whitespace run that does not end the word; the
  // rewritten pattern keeps this linear: a 16 MiB run before a digit splits at once (the plain pattern would
  // need ~10^14 steps), with the same words.
  const PreTokenizer deepseek = GgufPreTokenizer("deepseek-llm");
  const std::string text = std::string(16 << 20, ' ') + "1";
  const Words w = deepseek.Split(text);
  EXPECT_EQ(Join(w), text);
  EXPECT_EQ(w.back(), "1");
  EXPECT_EQ(deepseek.Split("a  \t"), (Words{"a", "  \t"}));
  EXPECT_EQ(One(R"(\s+$)").Split("a  \t"), (Words{"a", "  \t"}));
  EXPECT_EQ(One(R"(\s+$)").Split("  a"), (Words{"  a"}));
  EXPECT_EQ(One(R"(\s+$)").Split("a \n"), (Words{"a", " \n"}));
  EXPECT_EQ(One(R"(\s+$)").Split("a \nb \n"), (Words{"a \nb", " \n"}));
}

}  // namespace
}  // namespace posenc
