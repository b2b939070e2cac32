// The same weights in different containers give the same model: stories260K as llama2.c .bin, F32 GGUF
// (interleaved Q/K rows) and Hugging Face folder (half-split rows, no permutation at load); llama-mini-rand as
// a BF16 Hugging Face folder and BF16 GGUF. Perplexities agree to 1e-6 relative: the weights are equal bit for bit,
// and the only difference is the order of the q . k sums over channels (half-split vs interleaved), ~1e-7.
// Also: --train-ctx overrides a wrong context_length, and method native equals the model's own RoPE.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "model/model_test_util.h"
#include "posenc/eval/evaluate.h"

namespace posenc {
namespace {

constexpr double kSameWeightsRelTol = 1e-6;

EvalReport Stories(const std::string& model_path, std::vector<RopeMethod> methods, std::vector<int64_t> ctx,
                   std::optional<int64_t> train_ctx = std::nullopt) {
  EvalOptions o;
  o.model_path = model_path;
  o.tokenizer_path = testing::TokenizerPath();
  o.text_path = testing::TextPath("tinystories_val_stories.txt");
  o.ctx = std::move(ctx);
  o.methods = std::move(methods);
  o.n_pred = 2048;
  o.train_ctx = train_ctx;
  o.reuse_identical_rows = false;
  return RunEval(o);
}

void ExpectSame(const EvalReport& a, const EvalReport& b, double tol) {
  ASSERT_EQ(a.rows.size(), b.rows.size());
  EXPECT_EQ(a.first_ids, b.first_ids);
  for (size_t i = 0; i < a.rows.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "ctx " << a.rows[i].ctx << " " << RopeMethodName(a.rows[i].method));
    EXPECT_NEAR(a.rows[i].result.ppl / b.rows[i].result.ppl - 1.0, 0.0, tol)
        << a.rows[i].result.ppl << " vs " << b.rows[i].result.ppl;
    ASSERT_EQ(a.rows[i].result.buckets.size(), b.rows[i].result.buckets.size());
    for (size_t k = 0; k < a.rows[i].result.buckets.size(); ++k) {
      EXPECT_NEAR(a.rows[i].result.buckets[k].ppl / b.rows[i].result.buckets[k].ppl - 1.0, 0.0, tol);
    }
  }
}

TEST(ContainersTest, Stories260KBinF32GgufAndHfFolderAgree) {
  const std::vector<RopeMethod> methods = {RopeMethod::kNone, RopeMethod::kYarn, RopeMethod::kDynamic,
                                           RopeMethod::kDynamicHf};
  const EvalReport bin = Stories(testing::ModelPath(), methods, {1024});
  const EvalReport gguf = Stories(testing::ModelFixture("stories260K-F32.gguf"), methods, {1024});
  const EvalReport hf = Stories(testing::ModelFixture("stories260K-hf"), methods, {1024});
  {
    SCOPED_TRACE("F32 GGUF vs .bin");
    ExpectSame(gguf, bin, kSameWeightsRelTol);
  }
  {
    SCOPED_TRACE("HF folder vs .bin");
    ExpectSame(hf, bin, kSameWeightsRelTol);
  }
}

// llama.cpp's llama2.c converter writes context_length 128 for a model trained at 512: --train-ctx 512 gives
// exactly the corrected file's numbers (same bytes otherwise), and without it L0 is the file's 128.
TEST(ContainersTest, TrainCtxOverridesWrongContextLength) {
  const std::vector<RopeMethod> methods = {RopeMethod::kNone, RopeMethod::kYarn};
  const EvalReport fixed = Stories(testing::ModelFixture("stories260K-F32.gguf"), methods, {1024});
  const EvalReport raw = Stories(testing::ModelFixture("stories260K-f32-ctx128.gguf"), methods, {1024});
  EXPECT_EQ(raw.config.train_ctx, 128);
  const EvalReport overridden = Stories(testing::ModelFixture("stories260K-f32-ctx128.gguf"), methods, {1024}, 512);
  EXPECT_EQ(overridden.config.train_ctx, 512);
  ExpectSame(overridden, fixed, 0.0);
  // yarn scales from L0: s = 1024 / 128 = 8 instead of 2, a different model.
  EXPECT_GT(std::fabs(raw.rows[1].result.ppl / fixed.rows[1].result.ppl - 1.0), 1e-3);
}

// A file without RoPE scaling: native is the plain RoPE (method none) bit for bit.
TEST(ContainersTest, NativeIsTheFilesOwnRope) {
  const EvalReport r = Stories(testing::ModelFixture("stories260K-F32.gguf"), {RopeMethod::kNone, RopeMethod::kNative},
                               {1024});
  ASSERT_EQ(r.rows.size(), 2u);
  EXPECT_EQ(r.rows[0].result.ppl, r.rows[1].result.ppl);
}

// Weights kept in the file's encoding (QuantMatmul) and converted to float32 at load multiply the same
// DequantizeRow values: the same perplexity up to float32 summation order (~1e-7).
TEST(ContainersTest, FileEncodedAndFloat32WeightsAgree) {
  for (const char* name : {"stories260K-Q4_K_M.gguf", "stories260K-F16.gguf"}) {
    SCOPED_TRACE(name);
    EvalOptions o;
    o.model_path = testing::ModelFixture(name);
    o.tokenizer_path = testing::TokenizerPath();
    o.text_path = testing::TextPath("tinystories_val_stories.txt");
    o.ctx = {1024};
    o.methods = {RopeMethod::kNone};
    o.n_pred = 2048;
    o.weights = WeightStorage::kFile;
    const EvalReport file = RunEval(o);
    o.weights = WeightStorage::kFloat32;
    const EvalReport f32 = RunEval(o);
    ExpectSame(file, f32, kSameWeightsRelTol);
  }
}

TEST(ContainersTest, LlamaMiniRandHfFolderAndBf16GgufAgree) {
  const std::string hf = testing::SharedModel("llama-mini-rand");
  const std::string gguf = testing::SharedModel("llama-mini-rand-bf16.gguf");
  POSENC_SKIP_IF_ABSENT(hf);
  POSENC_SKIP_IF_ABSENT(gguf);
  EvalOptions o;
  o.text_path = testing::TextPath("tinyshakespeare.txt");
  o.ctx = {1024};
  o.methods = {RopeMethod::kNone, RopeMethod::kNtk};
  o.n_pred = 1024;
  o.reuse_identical_rows = false;
  o.model_path = hf;  // its tokenizer.model
  const EvalReport a = RunEval(o);
  o.model_path = gguf;  // its GGUF vocabulary
  const EvalReport b = RunEval(o);
  ExpectSame(a, b, kSameWeightsRelTol);
}

}  // namespace
}  // namespace posenc
