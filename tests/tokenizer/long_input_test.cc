// Long inputs: a 10 MiB line without a newline through each encoder family (SentencePiece from GGUF, byte-level
// BPE with the DeepSeek LLM regex list, llama2.c), and runs of one character that make the merge heap as large
// as the text. Every one completes and decodes back to its bytes (no time is asserted: benchmarks time).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "posenc/eval/documents.h"
#include "posenc/tokenizer/load.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

// 10 MiB of Shakespeare with every newline made a space: one line.
const std::string& TenMibLine() {
  static const std::string line = [] {
    std::string text = ReadTextFile(std::string(POSENC_DATA_DIR) + "/text/tinyshakespeare.txt");
    for (char& c : text) c = c == '\n' ? ' ' : c;
    std::string out;
    while (out.size() < (size_t{10} << 20)) out += text;
    out.resize(size_t{10} << 20);
    return out;
  }();
  return line;
}

void ExpectRoundTrip(const Tokenizer& t, const std::string& text, bool bos) {
  const std::vector<int> ids = t.Encode(text, bos);
  ASSERT_FALSE(ids.empty());
  EXPECT_LT(ids.size(), text.size() + 2);
  EXPECT_TRUE(t.Decode(ids) == text) << t.Describe() << ": decode differs on a " << text.size() << "-byte text";
}

TEST(LongInputTest, TenMibLineSentencePiece) {
  ExpectRoundTrip(*LoadTokenizer(testing::VocabGguf("llama-spm")), TenMibLine(), true);
}

TEST(LongInputTest, TenMibLineByteLevelBpe) {
  ExpectRoundTrip(*LoadTokenizer(testing::VocabGguf("deepseek-llm")), TenMibLine(), false);
}

TEST(LongInputTest, TenMibLineLlama2c) {
  // llama2.c decoding drops the dummy-prefix space only after BOS.
  ExpectRoundTrip(*LoadTokenizer(std::string(POSENC_DATA_DIR) + "/tok512.bin"), TenMibLine(), true);
}

TEST(LongInputTest, OneCharacterRuns) {
  const std::string a(1 << 18, 'a'), spaces = std::string(1 << 18, ' ') + "x";
  for (const std::string name : {"llama-spm", "gpt-2", "starcoder"}) {
    const std::unique_ptr<Tokenizer> t = LoadTokenizer(testing::VocabGguf(name));
    ExpectRoundTrip(*t, a, false);
    ExpectRoundTrip(*t, spaces, false);
  }
}

}  // namespace
}  // namespace posenc
