// Bad input to `posenc eval`, one test per case: each is a clear error naming the problem, raised before
// any forward pass.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"

namespace posenc {
namespace {

std::string TempFile(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("posenc_eval_errors_" + std::to_string(::getpid()) + "_" + name)).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

EvalOptions Defaults() {
  EvalOptions o;
  o.model_path = testing::ModelPath();
  o.tokenizer_path = testing::TokenizerPath();
  o.text_path = testing::TextPath("tinystories_sample_cs336.txt");
  o.ctx = {256};
  o.methods = {EvalMethod::kNone};
  o.n_pred = 256;
  return o;
}

template <typename E>
void ExpectError(const EvalOptions& o, const std::vector<std::string>& parts) {
  try {
    RunEval(o);
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(EvalErrorsTest, DefaultsRun) {
  const EvalReport r = RunEval(Defaults());
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].result.count, 256);
}

TEST(EvalErrorsTest, TruncatedCheckpoint) {
  std::string bytes = FileBytes(testing::ModelPath());
  bytes.resize(bytes.size() / 2);
  EvalOptions o = Defaults();
  o.model_path = TempFile("half.bin", bytes);
  ExpectError<IoError>(o, {o.model_path, "expected 1056540 bytes", "got 528270"});
  std::remove(o.model_path.c_str());
}

TEST(EvalErrorsTest, InconsistentCheckpointHeader) {
  std::string bytes = FileBytes(testing::ModelPath());
  const int32_t n_kv_heads = 3;  // 8 query heads cannot be split into 3 groups
  std::memcpy(bytes.data() + 16, &n_kv_heads, 4);
  EvalOptions o = Defaults();
  o.model_path = TempFile("kv3.bin", bytes);
  ExpectError<ConfigError>(o, {"n_heads must be a multiple of n_kv_heads", "n_kv_heads=3"});
  std::remove(o.model_path.c_str());
}

TEST(EvalErrorsTest, TokenizerOfWrongVocabSize) {
  // A tokenizer written for 511 pieces: tok512 minus its last piece.
  std::string bytes = FileBytes(testing::TokenizerPath());
  const std::string last = testing::Tok512().Piece(511);
  bytes.resize(bytes.size() - 8 - last.size());
  EvalOptions o = Defaults();
  o.tokenizer_path = TempFile("tok511.bin", bytes);
  ExpectError<IoError>(o, {o.tokenizer_path, "truncated in piece 511 of vocab_size 512"});
  std::remove(o.tokenizer_path.c_str());
}

TEST(EvalErrorsTest, EmptyText) {
  EvalOptions o = Defaults();
  o.text_path = TempFile("empty.txt", "");
  ExpectError<IoError>(o, {"is empty"});
  std::remove(o.text_path.c_str());
}

TEST(EvalErrorsTest, TextShorterThanNPlusOneTokens) {
  EvalOptions o = Defaults();
  o.n_pred = 2048;  // the sample text has 1814 tokens
  ExpectError<ConfigError>(o, {"the text has 1814 tokens; N + 1 = 2049 are needed"});
}

TEST(EvalErrorsTest, NNotAMultipleOfCtx) {
  EvalOptions o = Defaults();
  o.ctx = {256, 384};
  o.n_pred = 512;
  ExpectError<ConfigError>(o, {"must be a multiple of every ctx", "512 % 384 = 128"});
}

TEST(EvalErrorsTest, UnknownMethod) {
  try {
    ParseEvalMethod("rope-magic");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown method 'rope-magic' (expected one of none, linear, ntk, yarn, "
                                         "dynamic, dynamic-hf, llama3, longrope)"),
              std::string::npos)
        << e.what();
  }
}

TEST(EvalErrorsTest, MethodWithoutItsParameters) {
  EvalOptions o = Defaults();
  o.methods = {EvalMethod::kNone, EvalMethod::kLlama3};
  ExpectError<ConfigError>(o, {"method 'llama3' needs its parameters"});
}

TEST(EvalErrorsTest, MissingFiles) {
  EvalOptions o = Defaults();
  o.text_path = "/nonexistent/text.txt";
  ExpectError<IoError>(o, {"/nonexistent/text.txt"});
}

}  // namespace
}  // namespace posenc
