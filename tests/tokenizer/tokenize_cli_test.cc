// posenc tokenize: output forms, --add-bos, standard input, and errors with their exit status.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <fstream>
#include <string>

#include "test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

std::string Data(const std::string& name) { return std::string(POSENC_DATA_DIR) + "/" + name; }

// A text file holding `text`, as standard input: "< file".
std::string Stdin(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "posenc_tokenize_" + name + ".txt";
  std::ofstream(path, std::ios::binary) << text;
  return "2>&1 < '" + path + "'";
}

TEST(TokenizeCliTest, IdsJsonAndAddBos) {
  const std::string model = " --model '" + testing::Llama2TokenizerModel() + "'";
  testing::CliResult r = testing::RunPosenc("tokenize" + model, Stdin("hello", "Hello world\n"));
  // The newline is <0x0A> (13); add-bos auto follows the model (BOS).
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "1 15043 3186 13\n");
  r = testing::RunPosenc("tokenize --add-bos no --json" + model, Stdin("hello", "Hello world\n"));
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ids"], nlohmann::json({15043, 3186, 13}));
  EXPECT_EQ(j["pieces"], nlohmann::json({"\xE2\x96\x81Hello", "\xE2\x96\x81world", "<0x0A>"}));
  r = testing::RunPosenc("tokenize --add-bos yes --model '" + testing::VocabGguf("gpt-2") + "'", Stdin("hi", "Hi\n"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "50256 17250 198\n");  // GPT-2: BOS is <|endoftext|>; auto would add none
  r = testing::RunPosenc("tokenize --model '" + testing::VocabGguf("gpt-2") + "'", "2>&1 < /dev/null");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "\n");  // an empty text has no tokens
}

// --parse-special: "<|endoftext|>" in the text is GPT-2's control token 50256 (as Hugging Face's tokenizer(text));
// without it, its characters.
TEST(TokenizeCliTest, ParseSpecial) {
  const std::string model = " --add-bos no --model '" + testing::VocabGguf("gpt-2") + "'";
  testing::CliResult r = testing::RunPosenc("tokenize --parse-special" + model, Stdin("special", "Hi<|endoftext|>"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "17250 50256\n");
  r = testing::RunPosenc("tokenize" + model, Stdin("special", "Hi<|endoftext|>"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("50256"), std::string::npos) << r.out;
}

TEST(TokenizeCliTest, SeveralTextsOneLineEach) {
  const std::string a = ::testing::TempDir() + "posenc_tokenize_a.txt", b = ::testing::TempDir() + "posenc_tokenize_b.txt";
  std::ofstream(a) << "Hello";
  std::ofstream(b) << "";
  const testing::CliResult r = testing::RunPosenc("tokenize --add-bos no --model '" + testing::Llama2TokenizerModel() +
                                                  "' --text-file '" + a + "' --text-file '" + b + "' --text-file '" +
                                                  a + "'");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "15043\n\n15043\n");
  // A missing file is named before anything is loaded or printed.
  const testing::CliResult m = testing::RunPosenc("tokenize --model '" + testing::Llama2TokenizerModel() +
                                                  "' --text-file '" + a + "' --text-file /nonexistent/b.txt");
  EXPECT_EQ(m.status, 1);
  EXPECT_EQ(m.out.find("15043"), std::string::npos) << m.out;
  EXPECT_NE(m.out.find("/nonexistent/b.txt"), std::string::npos) << m.out;
}

TEST(TokenizeCliTest, Llama2cModelWithItsTokenizer) {
  const testing::CliResult r = testing::RunPosenc(
      "tokenize --model '" + Data("stories260K.bin") + "' --tokenizer '" + Data("tok512.bin") + "' --json",
      Stdin("once", "Once upon a time\n"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ids"], nlohmann::json({1, 403, 407, 261, 378, 13}));
}

TEST(TokenizeCliTest, ErrorsExitNonZeroWithAMessage) {
  testing::CliResult r = testing::RunPosenc("tokenize --model '" + Data("stories260K.bin") + "'", "2>&1 < /dev/null");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("holds no vocabulary"), std::string::npos) << r.out;
  r = testing::RunPosenc("tokenize --model /nonexistent/x.gguf", "2>&1 < /dev/null");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent/x.gguf"), std::string::npos) << r.out;
  r = testing::RunPosenc("tokenize --add-bos maybe --model '" + Data("tok512.bin") + "'", "2>&1 < /dev/null");
  EXPECT_NE(r.status, 0);
  r = testing::RunPosenc("tokenize --model '" + testing::Llama2TokenizerModel() + "' --text-file /nonexistent.txt",
                         "2>&1");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("/nonexistent.txt"), std::string::npos) << r.out;
  r = testing::RunPosenc("tokenize", "2>&1 < /dev/null");  // --model is required
  EXPECT_NE(r.status, 0);
}

}  // namespace
}  // namespace posenc
