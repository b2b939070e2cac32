// The eval takes any tokenizer the loader reads: stories260K's vocabulary from its GGUF (SentencePiece path)
// gives the llama2.c tokenizer's stream and therefore the same perplexities bit for bit; a tokenizer with more
// tokens than the model is refused before any forward pass.
#include <gtest/gtest.h>

#include <string>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"

namespace posenc {
namespace {

TEST(EvalTokenizerSourcesTest, GgufVocabularyGivesTheLlama2cResults) {
  EvalOptions o;
  o.model_path = testing::ModelPath();
  o.tokenizer_path = testing::TokenizerPath();
  o.text_path = testing::TextPath("tinystories_val_head.txt");
  o.ctx = {256};
  o.methods = {RopeMethod::kNone};
  o.n_pred = 512;
  const EvalReport bin = RunEval(o);
  o.tokenizer_path = std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-F32.gguf";
  const EvalReport gguf = RunEval(o);
  EXPECT_EQ(gguf.stream_length, bin.stream_length);
  EXPECT_EQ(gguf.first_ids, bin.first_ids);
  ASSERT_EQ(gguf.rows.size(), 1u);
  EXPECT_EQ(gguf.rows[0].result.ppl, bin.rows[0].result.ppl);
}

TEST(EvalTokenizerSourcesTest, ATokenizerLargerThanTheModelIsRefused) {
  EvalOptions o;
  o.model_path = testing::ModelPath();  // vocab_size 512
  o.tokenizer_path = std::string(POSENC_TEST_DATA_DIR) + "/tokenizer/llama2-tokenizer.model";  // 32000
  o.text_path = testing::TextPath("tinystories_val_head.txt");
  o.ctx = {256};
  o.methods = {RopeMethod::kNone};
  o.n_pred = 512;
  try {
    RunEval(o);
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("has 32000 tokens but the model's vocab_size is 512"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace posenc
