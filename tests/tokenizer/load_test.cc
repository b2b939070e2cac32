// The loader: what each path is taken for, Hugging Face directories, a llama2.c checkpoint's vocabulary size,
// and paths that are not tokenizers (missing, a FIFO, a directory without tokenizer files).
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/tokenizer/llama2c.h"
#include "posenc/tokenizer/load.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

std::string DataFile(const std::string& name) { return std::string(POSENC_DATA_DIR) + "/" + name; }

TEST(LoadTokenizerTest, DetectsEachKind) {
  EXPECT_EQ(DetectTokenizerSource(testing::VocabGguf("gpt-2")), TokenizerSource::kGguf);
  EXPECT_EQ(DetectTokenizerSource(testing::Llama2TokenizerModel()), TokenizerSource::kSentencePiece);
  EXPECT_EQ(DetectTokenizerSource(DataFile("tok512.bin")), TokenizerSource::kLlama2c);
  EXPECT_EQ(DetectTokenizerSource(std::string(POSENC_TEST_DATA_DIR) + "/tokenizer"), TokenizerSource::kHfDirectory);
  testing::TempDir dir("tokjson");
  std::ofstream(dir / "x.json") << "  \n{\"model\": {}}";
  EXPECT_EQ(DetectTokenizerSource(dir / "x.json"), TokenizerSource::kTokenizerJson);
  // A GGUF model file (weights and vocabulary) loads its tokenizer too.
  const std::unique_ptr<Tokenizer> model = LoadTokenizer(testing::ModelFixture("stories260K-F32.gguf"));
  EXPECT_EQ(model->vocab_size(), 512);
  EXPECT_EQ(model->Encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
}

TEST(LoadTokenizerTest, Llama2cVocabularySizeFromTheCheckpointOrCounted) {
  const std::unique_ptr<Tokenizer> counted = LoadTokenizer(DataFile("tok512.bin"));
  EXPECT_EQ(counted->vocab_size(), 512);
  EXPECT_EQ(counted->Encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  const std::unique_ptr<Tokenizer> from_model = LoadModelTokenizer(DataFile("stories260K.bin"), DataFile("tok512.bin"));
  EXPECT_EQ(from_model->vocab_size(), 512);
  TokenizerLoadOptions wrong;
  wrong.llama2c_vocab_size = 511;
  EXPECT_THROW(LoadTokenizer(DataFile("tok512.bin"), wrong), IoError);
  try {
    LoadModelTokenizer(DataFile("stories260K.bin"), "");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("llama2.c checkpoint, which holds no vocabulary"), std::string::npos);
  }
}

TEST(LoadTokenizerTest, HuggingFaceDirectories) {
  testing::TempDir dir("hfdir");
  EXPECT_THROW(LoadTokenizer(dir.path.string()), IoError);  // neither file
  std::filesystem::copy_file(testing::Llama2TokenizerModel(), dir / "tokenizer.model");
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(dir.path.string());
  EXPECT_EQ(sp->Encode("Hello world", false), (std::vector<int>{15043, 3186}));
  // tokenizer.json wins over tokenizer.model, and tokenizer_config.json beside it is read.
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "<s>": 3},
      "merges": ["a b"]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false},
      "added_tokens": [{"id": 3, "content": "<s>", "special": true}]})";
  std::ofstream(dir / "tokenizer_config.json") << R"({"bos_token": "<s>", "add_bos_token": true})";
  const std::unique_ptr<Tokenizer> json = LoadTokenizer(dir.path.string());
  EXPECT_EQ(json->vocab_size(), 4);
  EXPECT_EQ(json->Encode("ab", json->add_bos_default()), (std::vector<int>{3, 2}));
  EXPECT_EQ(LoadTokenizer(dir / "tokenizer.json")->bos_id(), 3);  // the file alone reads the config beside it
}

// A tokenizer.json posenc refuses (SentencePiece-style, Metaspace) with a tokenizer.model beside it: the latter is
// used and the refusal is a note; when both are refused, the error gives both reasons.
TEST(LoadTokenizerTest, RefusedTokenizerJsonFallsBackToTokenizerModel) {
  testing::TempDir dir("hffallback");
  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581"}})";
  EXPECT_THROW(LoadTokenizer(dir.path.string()), ConfigError);  // no tokenizer.model: the refusal itself
  std::filesystem::copy_file(testing::Llama2TokenizerModel(), dir / "tokenizer.model");
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(dir.path.string());
  EXPECT_EQ(sp->Encode("Hello world", false), (std::vector<int>{15043, 3186}));
  ASSERT_EQ(sp->notes().size(), 1u);
  EXPECT_NE(sp->notes()[0].find("tokenizer.json is refused ("), std::string::npos) << sp->notes()[0];
  EXPECT_NE(sp->notes()[0].find("Metaspace"), std::string::npos) << sp->notes()[0];
  EXPECT_NE(sp->notes()[0].find("the tokenizer.model beside it is used"), std::string::npos) << sp->notes()[0];
  std::filesystem::remove(dir / "tokenizer.model");
  std::ofstream(dir / "tokenizer.model") << "not a sentencepiece model";
  testing::ExpectThrowWith<ConfigError>([&] { LoadTokenizer(dir.path.string()); },
                                        {"Metaspace", "and tokenizer.model beside it is refused too"});
}

// parse_special reaches the tokenizer through the loader.
TEST(LoadTokenizerTest, ParseSpecialOption) {
  TokenizerLoadOptions o;
  o.parse_special = true;
  const std::unique_ptr<Tokenizer> t = LoadTokenizer(DataFile("tok512.bin"), o);
  EXPECT_TRUE(t->parse_special());
  EXPECT_FALSE(LoadTokenizer(DataFile("tok512.bin"))->parse_special());
  EXPECT_TRUE(LoadModelTokenizer(DataFile("stories260K.bin"), DataFile("tok512.bin"), true)->parse_special());
}

// The Qwen2.5 folder as shipped: its tokenizer.json's NFC normalizer makes a decomposed text tokenize as the
// composed one, and its special tokens (<|im_start|> 2046, <|endoftext|> 2045 in this reduced vocabulary) are
// matched only under parse_special.
TEST(LoadTokenizerTest, Qwen25FolderNfcAndSpecialTokens) {
  const std::string folder = testing::SharedModel("arch/qwen2.5");
  POSENC_SKIP_IF_ABSENT(folder);
  std::unique_ptr<Tokenizer> t = LoadTokenizer(folder);
  EXPECT_NE(t->Describe().find("normalizer NFC"), std::string::npos) << t->Describe();
  EXPECT_EQ(t->Encode("Caf" "e\xCC\x81 cre\xCC\x80me", false), t->Encode("Caf\xC3\xA9 cr\xC3\xA8me", false));
  const std::vector<int> plain = t->Encode("<|im_start|>user hi<|endoftext|>", false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2046), 0);
  t->set_parse_special(true);
  const std::vector<int> parsed = t->Encode("<|im_start|>user hi<|endoftext|>", false);
  ASSERT_GE(parsed.size(), 3u);
  EXPECT_EQ(parsed.front(), 2046);
  EXPECT_EQ(parsed.back(), 2045);
  std::vector<int> middle = t->Encode("user hi", false);
  middle.insert(middle.begin(), 2046);
  middle.push_back(2045);
  EXPECT_EQ(parsed, middle);
}

TEST(LoadTokenizerTest, PathsThatAreNotTokenizers) {
  EXPECT_THROW(LoadTokenizer("/nonexistent/tokenizer.model"), IoError);
  testing::TempDir dir("fifo");
  const std::string fifo = dir / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  try {
    LoadTokenizer(fifo);  // refused before it is opened: no hang waiting for a writer
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
  }
  std::ofstream(dir / "junk.model") << "not a protobuf";
  EXPECT_THROW(LoadTokenizer(dir / "junk.model"), ConfigError);
  std::ofstream(dir / "junk.bin") << "ab";
  EXPECT_THROW(LoadTokenizer(dir / "junk.bin"), IoError);
}

}  // namespace
}  // namespace posenc
