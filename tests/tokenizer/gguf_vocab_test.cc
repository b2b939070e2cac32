// GGUF vocabularies: the bundled stories260K GGUF's SentencePiece vocabulary gives the llama2.c stream of the
// eval text (formats_ppl.json), and every malformed tokenizer.ggml.* field is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"
#include "posenc/formats/gguf.h"
#include "posenc/formats/gguf_writer.h"
#include "posenc/tokenizer/gguf_vocab.h"
#include "posenc/tokenizer/load.h"
#include "test_util.h"

namespace posenc {
namespace {

// stories260K-F32.gguf holds tok512's pieces and scores as a SentencePiece vocabulary; the eval protocol's stream
// of the TinyStories text (llama2.c encode, BOS per document) is recorded in formats_ppl.json.
TEST(GgufVocabTest, Stories260kVocabularyGivesTheLlama2cStream) {
  const nlohmann::json fixture = testing::LoadTestJson("formats_ppl.json")["fixtures"]["stories260K-F32.gguf"];
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(testing::ModelFixture("stories260K-F32.gguf"));
  const TokenStream stream =
      BuildTokenStream(ReadTextFile(std::string(POSENC_DATA_DIR) + "/text/" + fixture["text"].get<std::string>()),
                       *tok);
  EXPECT_EQ(static_cast<int64_t>(stream.ids.size()), fixture["stream_length"].get<int64_t>());
  const std::vector<int> first = fixture["first_ids"].get<std::vector<int>>();
  EXPECT_EQ(std::vector<int>(stream.ids.begin(), stream.ids.begin() + static_cast<std::ptrdiff_t>(first.size())),
            first);
}

// A vocabulary GGUF with `tokens` and the given extra keys.
std::vector<uint8_t> VocabFile(const std::string& model, std::vector<std::string> tokens,
                               const std::vector<std::pair<std::string, GgufWriteValue>>& extra) {
  GgufWriter w;
  w.Set("general.architecture", GgufWriteValue::String("llama"));
  w.Set("tokenizer.ggml.model", GgufWriteValue::String(model));
  w.Set("tokenizer.ggml.tokens", GgufWriteValue::StringArray(std::move(tokens)));
  for (const auto& [key, value] : extra) w.Set(key, value);
  return w.Serialize();
}

std::unique_ptr<Tokenizer> FromBytes(std::vector<uint8_t> bytes) {
  return LoadGgufTokenizer(GgufFile::Parse(MappedFile::FromBytes(std::move(bytes), "vocab.gguf")));
}

template <typename E>
void ExpectError(std::vector<uint8_t> bytes, const std::string& part) {
  testing::ExpectThrowWith<E>([&] { FromBytes(std::move(bytes)); }, {part});
}

TEST(GgufVocabTest, SmallVocabulariesLoad) {
  const std::unique_ptr<Tokenizer> spm =
      FromBytes(VocabFile("llama", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"},
                          {{"tokenizer.ggml.scores", GgufWriteValue::Float32Array(std::vector<float>{0, 0, 0, -1, -1, -2})},
                           {"tokenizer.ggml.token_type", GgufWriteValue::Int32Array(std::vector<int32_t>{2, 3, 3, 1, 1, 1})},
                           {"tokenizer.ggml.add_bos_token", GgufWriteValue::Bool(false)}}));
  EXPECT_EQ(spm->Encode("a", false), (std::vector<int>{5}));
  EXPECT_FALSE(spm->add_bos_default());
  EXPECT_EQ(spm->bos_id(), 1);  // llama.cpp's default when the key is absent
  const std::unique_ptr<Tokenizer> bpe =
      FromBytes(VocabFile("gpt2", {"a", "b", "ab"}, {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"a b"})}}));
  EXPECT_EQ(bpe->Encode("ab", false), (std::vector<int>{2}));
  EXPECT_EQ(bpe->bos_id(), -1);
  EXPECT_TRUE(spm->notes().empty());
  // A byte-level vocabulary without tokenizer.ggml.pre gets the default regex, and says so (as llama.cpp).
  ASSERT_EQ(bpe->notes().size(), 1u);
  EXPECT_NE(bpe->notes()[0].find("has no tokenizer.ggml.pre: the 'default' pre-tokenizer"), std::string::npos)
      << bpe->notes()[0];
  const std::unique_ptr<Tokenizer> named =
      FromBytes(VocabFile("gpt2", {"a", "b", "ab"}, {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"a b"})},
                                                     {"tokenizer.ggml.pre", GgufWriteValue::String("default")}}));
  EXPECT_TRUE(named->notes().empty());
}

// parse_special on a SentencePiece vocabulary: control and unknown pieces written in the text become their ids,
// and each run between them is encoded alone (its own dummy prefix, as llama.cpp's tokenize with parse_special).
TEST(GgufVocabTest, ParseSpecialMatchesControlPieces) {
  std::unique_ptr<Tokenizer> spm =
      FromBytes(VocabFile("llama", {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "\xE2\x96\x81" "a"},
                          {{"tokenizer.ggml.scores", GgufWriteValue::Float32Array(std::vector<float>{0, 0, 0, -1, -1, -2})},
                           {"tokenizer.ggml.token_type", GgufWriteValue::Int32Array(std::vector<int32_t>{2, 3, 3, 1, 1, 1})}}));
  const std::vector<int> plain = spm->Encode("a</s>a", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);  // by default "</s>" is characters
  spm->set_parse_special(true);
  EXPECT_TRUE(spm->parse_special());
  EXPECT_EQ(spm->Encode("a</s>a", false), (std::vector<int>{5, 2, 5}));
  EXPECT_EQ(spm->Encode("<s>a<unk>", true), (std::vector<int>{1, 1, 5, 0}));
  spm->set_parse_special(false);
  EXPECT_EQ(spm->Encode("a</s>a", false), plain);
}

TEST(GgufVocabTest, MalformedVocabulariesAreErrors) {
  ExpectError<ConfigError>(VocabFile("bert", {"a"}, {}), "tokenizer.ggml.model 'bert' is not supported");
  ExpectError<ConfigError>(VocabFile("t5", {"a"}, {}), "'t5' is not supported");
  {
    GgufWriter w;
    w.Set("tokenizer.ggml.model", GgufWriteValue::String("llama"));
    ExpectError<ConfigError>(w.Serialize(), "has no tokenizer.ggml.tokens");
  }
  {
    GgufWriter w;
    w.Set("general.architecture", GgufWriteValue::String("llama"));
    ExpectError<ConfigError>(w.Serialize(), "has no tokenizer.ggml.model");
  }
  ExpectError<ConfigError>(
      VocabFile("llama", {"<unk>", "<s>", "</s>"},
                {{"tokenizer.ggml.token_type", GgufWriteValue::Int32Array(std::vector<int32_t>{2, 3, 9})}}),
      "tokenizer.ggml.token_type[2] must be a token type in 0..6, got 9");
  ExpectError<ConfigError>(VocabFile("llama", {"<unk>", "<s>", "</s>"},
                                     {{"tokenizer.ggml.bos_token_id", GgufWriteValue::UInt32(7)}}),
                           "tokenizer.ggml.bos_token_id must be in [0, 3), got 7");
  ExpectError<ConfigError>(VocabFile("llama", {"<unk>", "<s>", "</s>"},
                                     {{"tokenizer.ggml.scores", GgufWriteValue::Float32Array(std::vector<float>{0, 0})}}),
                           "3 tokens but 2 scores");
  ExpectError<ConfigError>(
      VocabFile("llama", {"<unk>", "<s>", "</s>", "a"},
                {{"tokenizer.ggml.scores", GgufWriteValue::Float32Array(std::vector<float>{0, 0, 0, NAN})}}),
      "has score NaN");
  ExpectError<ConfigError>(VocabFile("llama", {"<unk>", "<s>", "a", "a"}, {}), "are both 'a'");
  ExpectError<ConfigError>(VocabFile("gpt2", {"a", "b"}, {}), "has no tokenizer.ggml.merges");
  ExpectError<ConfigError>(VocabFile("gpt2", {"a", "b"}, {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"ab"})}}),
                           "tokenizer.ggml.merges[0] 'ab' is not two tokens separated by a space");
  ExpectError<ConfigError>(
      VocabFile("gpt2", {"a", "b"}, {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"a b"})}}),
      "names merged text 'ab', which is not a token");
  ExpectError<ConfigError>(
      VocabFile("gpt2", {"a", "b", "ab"}, {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"a c"})}}),
      "names right side 'c'");
  ExpectError<ConfigError>(
      VocabFile("gpt2", {"a", "b", "ab"},
                {{"tokenizer.ggml.merges", GgufWriteValue::StringArray({"a b"})},
                 {"tokenizer.ggml.pre", GgufWriteValue::String("martian")}}),
      "'martian' is not a known pre-tokenizer");
  ExpectError<ConfigError>(VocabFile("llama", {"<unk>", "<s>", "</s>"},
                                     {{"tokenizer.ggml.scores", GgufWriteValue::String("not an array")}}),
                           "tokenizer.ggml.scores");
}

// Lengths in the file itself (a negative / absurd string length, a token count past the end) are the GGUF
// reader's to refuse, before any vocabulary is built.
TEST(GgufVocabTest, AbsurdLengthsAreRefusedByTheReader) {
  testing::RawGguf raw;
  std::vector<uint8_t> payload;
  testing::PutLe<uint32_t>(payload, static_cast<uint32_t>(GgufType::kString));
  testing::PutLe<uint64_t>(payload, 2);
  testing::PutLe<uint64_t>(payload, uint64_t{1} << 62);  // a string longer than the file
  payload.push_back('a');
  raw.kvs.push_back(testing::RawKv("tokenizer.ggml.tokens", static_cast<uint32_t>(GgufType::kArray), payload));
  EXPECT_THROW(FromBytes(raw.Build()), IoError);
  testing::RawGguf count;
  std::vector<uint8_t> many;
  testing::PutLe<uint32_t>(many, static_cast<uint32_t>(GgufType::kString));
  testing::PutLe<uint64_t>(many, ~uint64_t{0});  // 2^64 - 1 tokens
  count.kvs.push_back(testing::RawKv("tokenizer.ggml.tokens", static_cast<uint32_t>(GgufType::kArray), many));
  EXPECT_THROW(FromBytes(count.Build()), IoError);
}

}  // namespace
}  // namespace posenc
