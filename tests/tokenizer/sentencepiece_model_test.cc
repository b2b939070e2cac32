// The sentencepiece tokenizer.model path: the Llama 2 token stream of a whole text as recorded by the
// sentencepiece library itself (tests/data/formats_ppl.json), the GGUF path of the same vocabulary on that
// text, and what the path refuses.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"
#include "posenc/tokenizer/load.h"
#include "posenc/tokenizer/sentencepiece_model.h"
#include "test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

std::string Shakespeare() { return ReadTextFile(std::string(POSENC_DATA_DIR) + "/text/tinyshakespeare.txt"); }

// formats_ppl.json fixture llama-mini-rand: documents split by <|endoftext|> lines, BOS first, each encoded by
// the sentencepiece library with Llama 2's tokenizer.model.
TEST(SentencePieceModelTest, ShakespeareStreamEqualsTheSentencepieceRecord) {
  const nlohmann::json fixture = testing::LoadTestJson("formats_ppl.json")["fixtures"]["llama-mini-rand"];
  ASSERT_EQ(fixture["text"], "tinyshakespeare.txt");
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(testing::Llama2TokenizerModel());
  const TokenStream stream = BuildTokenStream(Shakespeare(), *sp);
  EXPECT_EQ(static_cast<int64_t>(stream.ids.size()), fixture["stream_length"].get<int64_t>());
  const std::vector<int> first = fixture["first_ids"].get<std::vector<int>>();
  ASSERT_GE(stream.ids.size(), first.size());
  EXPECT_EQ(std::vector<int>(stream.ids.begin(), stream.ids.begin() + static_cast<std::ptrdiff_t>(first.size())),
            first);
}

// The same vocabulary from the GGUF (our SentencePiece encoder) gives the sentencepiece library's stream.
TEST(SentencePieceModelTest, GgufPathEqualsTheLibraryOnAWholeText) {
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(testing::Llama2TokenizerModel());
  const std::unique_ptr<Tokenizer> gguf = LoadTokenizer(testing::VocabGguf("llama-spm"));
  const std::string text = Shakespeare();
  const std::vector<int> a = sp->Encode(text, true), b = gguf->Encode(text, true);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(a, b);
  EXPECT_EQ(gguf->Decode(b), text);
}

TEST(SentencePieceModelTest, InvalidUtf8IsRefusedNotReplaced) {
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(testing::Llama2TokenizerModel());
  try {
    sp->Encode("ok \xFF then", false);
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 at byte offset 3"), std::string::npos) << e.what();
  }
  EXPECT_THROW(sp->Encode("\xC3", false), ConfigError);  // truncated sequence
  EXPECT_TRUE(sp->Encode("", false).empty());
}

TEST(SentencePieceModelTest, BadModelBytesAndIdsAreErrors) {
  EXPECT_THROW(SentencePieceTokenizer::FromBytes("not a model", "junk.model"), ConfigError);
  EXPECT_THROW(SentencePieceTokenizer::FromBytes("", "empty.model"), ConfigError);
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(testing::Llama2TokenizerModel());
  EXPECT_THROW(sp->Decode(std::vector<int>{1, 32000}), RangeError);
  EXPECT_THROW(sp->Decode(std::vector<int>{-1}), RangeError);
  EXPECT_THROW(sp->Piece(32000), RangeError);
  EXPECT_EQ(sp->Piece(13), "<0x0A>");
  EXPECT_EQ(sp->Type(13), TokenType::kByte);
  EXPECT_TRUE(sp->add_bos_default());
}

}  // namespace
}  // namespace posenc
