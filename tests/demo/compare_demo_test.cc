// posenc demo compare: the options it runs, what it prints for a given report, and the one property of its
// numbers known without the oracle: within the training length (s = 1) the scalings are plain RoPE.
#include "posenc/demo/compare_demo.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"
#include "posenc/demo/common.h"

namespace posenc::demo {
namespace {

const std::string kModel = std::string(POSENC_DATA_DIR) + "/stories260K.bin";
const std::string kTokenizer = std::string(POSENC_DATA_DIR) + "/tok512.bin";
const std::string kText = std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt";

TEST(CompareDemo, ModelNameIsThePathsLastComponent) {
  EXPECT_EQ(ModelName("data/stories260K.bin"), "stories260K.bin");
  EXPECT_EQ(ModelName("models/qwen2.5/"), "qwen2.5");
  EXPECT_EQ(ModelName("m.gguf"), "m.gguf");
  EXPECT_EQ(ModelName("/"), "/");
}

TEST(CompareDemo, OptionsAreAShortEval) {
  const EvalOptions o = CompareDemoOptions("m", "t", "x", 3, 512);
  EXPECT_EQ(o.ctx, (std::vector<int64_t>{512, 1024, 2048}));
  EXPECT_EQ(o.methods, (std::vector<RopeMethod>{RopeMethod::kNone, RopeMethod::kLinear, RopeMethod::kNtk,
                                                RopeMethod::kYarn, RopeMethod::kDynamic}));
  EXPECT_EQ(o.n_pred, 4096);
  for (int64_t L : o.ctx) EXPECT_EQ(o.n_pred % L, 0);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(o.model_path, "m");
  // Another model's contexts are its own L0 x1, x2, x4, with whole windows of the longest.
  const EvalOptions big = CompareDemoOptions("m", "t", "x", 1, 4096);
  EXPECT_EQ(big.ctx, (std::vector<int64_t>{4096, 8192, 16384}));
  EXPECT_EQ(big.n_pred, 16384);
  EXPECT_EQ(CompareDemoOptions("m", "t", "x", 1, 1000).n_pred, 8000);  // two windows of 4000 hold 4096
  EXPECT_THROW(CompareDemoOptions("m", "t", "x", 1, 0), ConfigError);
}

EvalRow Row(int64_t ctx, RopeMethod m, double ppl, std::vector<BucketResult> buckets) {
  EvalRow r;
  r.ctx = ctx;
  r.method = m;
  r.result.ppl = ppl;
  r.result.buckets = std::move(buckets);
  return r;
}

TEST(CompareDemo, RenderPrintsTheReportsNumbersAndRanks) {
  CompareDemo demo;
  demo.ctx = {512, 2048};
  demo.methods = {RopeMethod::kNone, RopeMethod::kLinear};
  demo.report.config.train_ctx = 512;
  demo.report.config.head_dim = 8;
  demo.report.config.layers.resize(1);
  demo.report.model_path = "stories.bin";
  demo.report.model_summary = "llama2.c llama: dim 64";
  demo.report.n_pred = 4096;
  demo.report.rows = {
      Row(512, RopeMethod::kNone, 3.25, {{0, 256, 1, 0, 3.5}, {256, 512, 1, 0, 3.0}}),
      Row(512, RopeMethod::kLinear, 3.25, {{0, 256, 1, 0, 3.5}, {256, 512, 1, 0, 3.0}}),
      Row(2048, RopeMethod::kNone, 4.5,
          {{0, 256, 1, 0, 3.5}, {256, 512, 1, 0, 3.0}, {512, 1024, 1, 0, 4.0}, {1024, 2048, 1, 0, 5.25}}),
      Row(2048, RopeMethod::kLinear, 25.0,
          {{0, 256, 1, 0, 24.5}, {256, 512, 1, 0, 20.0}, {512, 1024, 1, 0, 25.0}, {1024, 2048, 1, 0, 27.0}})};
  const std::string text = RenderCompareDemo(demo);
  auto has = [&](const std::string& s) {
    EXPECT_NE(text.find(s), std::string::npos) << "missing: " << s << "\n" << text;
  };
  has("  none              3.2500      4.5000");
  has("  linear            3.2500     25.0000");
  has("posenc eval on stories.bin (trained at L0 = 512 tokens), 4096 predictions per cell");
  has("  llama2.c llama: dim 64\n");
  has("on one model (head_dim 8: 4 frequency pairs)");
  has("ctx  2048: best none (4.5000), worst linear (25.0000)");
  has("ppl 3.5000 in [0,256), 5.2500 in [1024,2048): 1.50x.");
  has("ppl 24.5000 already in [0,256)");
  has("within training length every method is plain RoPE (s = 1): ppl 3.2500");
}

TEST(CompareDemo, WithinTrainingLengthScaledMethodsArePlainRope) {
  // s = 1 at ctx = L0 = 512: linear divides by 1, ntk multiplies the base by 1^(d/(d-2)), dynamic keeps the
  // base for every length <= L0; their tables equal none's, so their perplexities are equal bit for bit.
  EvalOptions o = CompareDemoOptions(kModel, kTokenizer, kText, 0, 512);
  o.ctx = {512};
  o.n_pred = 1024;
  o.methods = {RopeMethod::kNone, RopeMethod::kLinear, RopeMethod::kNtk, RopeMethod::kDynamic};
  const CompareDemo demo = RunCompareDemo(o);
  ASSERT_EQ(demo.report.rows.size(), 4u);
  const double none = demo.report.rows[0].result.ppl;
  EXPECT_GT(none, 1.0);
  for (const EvalRow& row : demo.report.rows) EXPECT_EQ(row.result.ppl, none) << RopeMethodName(row.method);
}

}  // namespace
}  // namespace posenc::demo
