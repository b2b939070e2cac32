// Bad input to `posenc eval`, one test per case: each is a clear error naming the problem, raised before
// any forward pass.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"
#include "posenc/eval/perplexity.h"

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
  o.methods = {RopeMethod::kNone};
  o.n_pred = 256;
  return o;
}

// Expects RunEval to throw E with every part in its message, before any window has been evaluated (the
// progress callback counts finished windows).
template <typename E>
void ExpectError(const EvalOptions& o, const std::vector<std::string>& parts) {
  int64_t windows_done = 0;
  try {
    RunEval(o, [&](int64_t done, int64_t) { windows_done = done; });
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
  EXPECT_EQ(windows_done, 0) << "the error came after the work had started";
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

// Position maps are refused up front under context-parallel eval (the ring has none), and a method listed twice.
TEST(EvalErrorsTest, RefusedBeforeAnyRow) {
  EvalOptions o = Defaults();
  o.methods = {RopeMethod::kNone, RopeMethod::kDualChunk};
  o.context_parallel = true;
  testing::ExpectThrowWith<ConfigError>([&] { RunEval(o); }, {"context_parallel", "'dca' is a position map"});
  EvalOptions twice = Defaults();
  twice.methods = {RopeMethod::kNone, RopeMethod::kYarn, RopeMethod::kNone};
  testing::ExpectThrowWith<ConfigError>([&] { RunEval(twice); }, {"`methods` lists 'none' twice"});
}

TEST(EvalErrorsTest, UnknownMethod) {
  try {
    ParseRopeMethod("rope-magic");
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("unknown method 'rope-magic' (expected one of none, linear, ntk, yarn, "
                                         "dynamic, dynamic-hf, llama3, longrope, native, self-extend, dca, rerope, "
                                         "leaky-rerope, sinks, lm-infinite)"),
              std::string::npos)
        << e.what();
  }
}

TEST(EvalErrorsTest, MethodWithoutItsParameters) {
  EvalOptions o = Defaults();
  o.methods = {RopeMethod::kNone, RopeMethod::kLlama3};
  ExpectError<ConfigError>(o, {"method 'llama3' needs its parameters"});
}

TEST(EvalErrorsTest, MissingFiles) {
  EvalOptions o = Defaults();
  o.text_path = "/nonexistent/text.txt";
  ExpectError<IoError>(o, {"/nonexistent/text.txt"});
}

// NaN in the first layer's query weights gave ppl 4.2735 with exit 0 (the ppl of the same model with those
// weights zeroed); the checkpoint is now refused at load, naming the tensor and the element.
TEST(EvalErrorsTest, NonFiniteWeightsAreNotAPerplexity) {
  std::string bytes = FileBytes(testing::ModelPath());
  const float nan = std::nanf("");
  std::memcpy(bytes.data() + 28 + 4 * (512 * 64 + 5 * 64) + 4 * 10, &nan, 4);  // wq[0, 0, 10]
  EvalOptions o = Defaults();
  o.model_path = TempFile("nan_wq.bin", bytes);
  ExpectError<IoError>(o, {o.model_path, "tensor wq[0]", "element [0, 10]", "nan"});
  std::remove(o.model_path.c_str());
}

// seq_len = 1 in the header passed the header check and failed only after the first row (its position buckets
// need L0 >= 2). Every (ctx, method) pair is now checked before the first window.
TEST(EvalErrorsTest, TrainingLengthOneIsRefusedBeforeTheWork) {
  std::string bytes = FileBytes(testing::ModelPath());
  // seq_len 512 -> 1 changes the legacy freq_cis block's size (seq_len * head_dim floats): drop 511 * 8 floats.
  const int32_t one = 1;
  std::memcpy(bytes.data() + 24, &one, 4);
  bytes.erase(bytes.size() - 4 * 511 * 8);
  EvalOptions o = Defaults();
  o.model_path = TempFile("seq1.bin", bytes);
  ExpectError<ConfigError>(o, {"L0 must be >= 2, got 1"});
  std::remove(o.model_path.c_str());
}

// Thread counts are bounded as bench bounds them: 100000 crashed inside the OpenMP runtime.
TEST(EvalErrorsTest, ThreadCountIsBounded) {
  EvalOptions o = Defaults();
  o.threads = 100000;
  ExpectError<ConfigError>(o, {"threads", "[0, 1024]", "got 100000"});
  o.threads = -1;
  ExpectError<ConfigError>(o, {"got -1"});
}

// A longrope factor of 1e-300 is positive as a double but 0 in float32, where inv_freq divides by it: inf
// inv_freq, NaN cos/sin, and a finite perplexity for that row. Refused before the work, naming the entry.
TEST(EvalErrorsTest, LongropeFactorZeroInFloat32IsRefused) {
  EvalOptions o = Defaults();
  o.methods = {RopeMethod::kNone, RopeMethod::kLongrope};
  RopeParams p;
  p.rope_type = RopeType::kLongrope;
  p.short_factor = {1.0, 1.0, 1.0, 1.0};
  p.long_factor = {1.0, 1e-300, 1.0, 1.0};
  p.factor = 4.0;
  o.method_options.longrope = p;
  ExpectError<ConfigError>(o, {"long_factor[1]", "1e-300", "float32"});
}

// A directory or a FIFO as the text or the tokenizer: refused before opening (a FIFO without a writer hung).
TEST(EvalErrorsTest, DirectoryAndFifoInputsAreRefused) {
  const std::string dir = TempFile("dir", "");
  std::remove(dir.c_str());
  std::filesystem::create_directory(dir);
  EvalOptions o = Defaults();
  o.text_path = dir;
  ExpectError<IoError>(o, {"text file", "is a directory"});
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  o = Defaults();
  o.tokenizer_path = fifo;
  ExpectError<IoError>(o, {"tokenizer", "FIFO"});
  o = Defaults();
  o.text_path = fifo;
  ExpectError<IoError>(o, {"text file", "FIFO"});
  std::filesystem::remove_all(dir);
}

// TokenNll on logits with NaN or infinity: an error, never a number.
TEST(EvalErrorsTest, NonFiniteLogitsHaveNoNll) {
  std::vector<float> logits = {0.5f, 1.0f, -2.0f};
  EXPECT_NEAR(TokenNll(logits.data(), 3, 1), 0.5045969023422836, 1e-12);  // log(e^.5 + e^1 + e^-2) - 1
  logits[2] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(TokenNll(logits.data(), 3, 1), NumericError);
  logits[2] = std::nanf("");
  EXPECT_THROW(TokenNll(logits.data(), 3, 0), NumericError);
}

}  // namespace
}  // namespace posenc
