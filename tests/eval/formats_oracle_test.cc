// `posenc eval --model` on every model fixture (GGUF F32/F16/BF16/Q8_0/Q4_K_M/..., Hugging Face folders) against
// the independent numpy oracle's perplexities in tests/data/formats_ppl.json: token stream (length, first 40
// ids), every (ctx, method) ppl and per-bucket ppl.
//
// Tolerance: 1e-4 relative on every ppl, as for the llama2.c oracle (oracle_test.cc): the oracle's float64 angles
// and summation order against our float32 forward pass differ by ~1e-6 relative; a wrong layout, permutation,
// dequantization or bucket moves ppl by 1e-3 or more.
//
// Rows: the normal run checks every row except dynamic at ctx 4096 on the 32000-vocab fixtures, whose per-row
// pre-rotation tables take 2 GiB (set POSENC_TEST_LARGE_ORACLE=1 to check those too). The sanitizer build
// (testing::SmallOracle) checks each fixture at ctx 1024 only, and the 32000-vocab fixtures with none and yarn
// only (the pre-rotation methods' paths are the stories260K fixtures' dynamic rows): the same code paths, fewer
// windows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "formats/formats_test_util.h"
#include "model/model_test_util.h"
#include "posenc/eval/evaluate.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr double kRelTol = 1e-4;

bool EnvIs(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

// The fixture's path: the repository's copy (tests/data/models) when it has one, else the large-fixture folder.
std::string FixturePath(const std::string& name) {
  const std::string local = testing::ModelFixture(name);
  return testing::Exists(local) ? local : testing::SharedModel(name);
}

// stories260K fixtures: the oracle tokenized with tok512.bin (llama2.c); llama-mini-rand: the model's own
// SentencePiece vocabulary (GGUF metadata or the folder's tokenizer.model).
bool IsStories(const std::string& name) { return name.rfind("stories260K", 0) == 0; }

void CheckFixture(const std::string& name) {
  const nlohmann::json fixture = testing::LoadTestJson("formats_ppl.json").at("fixtures").at(name);
  const std::string path = FixturePath(name);
  POSENC_SKIP_IF_ABSENT(path);
  const bool small = testing::SmallOracle();
  const bool large = EnvIs("POSENC_TEST_LARGE_ORACLE");
  EvalOptions o;
  o.model_path = path;
  o.tokenizer_path = IsStories(name) ? testing::TokenizerPath() : "";
  o.text_path = testing::TextPath(fixture.at("text").get<std::string>());
  o.n_pred = fixture.at("tokens").get<int64_t>();
  // One RunEval per ctx, with that ctx's selected methods.
  std::vector<int64_t> ctxs;
  std::vector<std::vector<RopeMethod>> methods;
  const int64_t small_ctx = 1024;
  for (const nlohmann::json& row : fixture.at("rows")) {
    const int64_t ctx = row.at("ctx").get<int64_t>();
    const RopeMethod m = ParseRopeMethod(row.at("method").get<std::string>());
    if (small && ctx != small_ctx) continue;
    if (small && !IsStories(name) && m != RopeMethod::kNone && m != RopeMethod::kYarn) continue;
    if (!large && !IsStories(name) && ctx > 2048 && m == RopeMethod::kDynamic) continue;
    auto it = std::find(ctxs.begin(), ctxs.end(), ctx);
    if (it == ctxs.end()) {
      ctxs.push_back(ctx);
      methods.emplace_back();
      it = ctxs.end() - 1;
    }
    methods[static_cast<size_t>(it - ctxs.begin())].push_back(m);
  }
  ASSERT_FALSE(ctxs.empty()) << "no rows selected for " << name;
  EvalReport report;
  for (size_t i = 0; i < ctxs.size(); ++i) {
    o.ctx = {ctxs[i]};
    o.methods = methods[i];
    EvalReport part = RunEval(o);
    if (i == 0) {
      report = std::move(part);
    } else {
      for (EvalRow& row : part.rows) report.rows.push_back(std::move(row));
    }
  }
  EXPECT_EQ(report.config.train_ctx, fixture.at("train_ctx").get<int64_t>());
  EXPECT_EQ(report.stream_length, fixture.at("stream_length").get<int64_t>());
  EXPECT_EQ(report.first_ids, fixture.at("first_ids").get<std::vector<int>>());

  double worst = 0.0;
  int64_t checked = 0;
  for (const nlohmann::json& want : fixture.at("rows")) {
    const int64_t ctx = want.at("ctx").get<int64_t>();
    const std::string method = want.at("method").get<std::string>();
    const auto it = std::find_if(report.rows.begin(), report.rows.end(), [&](const EvalRow& r) {
      return r.ctx == ctx && RopeMethodName(r.method) == method;
    });
    if (it == report.rows.end()) continue;  // a row this run leaves out (see the header)
    ++checked;
    SCOPED_TRACE(::testing::Message() << name << " ctx " << ctx << " " << method);
    const double ppl = want.at("ppl").get<double>();
    EXPECT_NEAR(it->result.ppl / ppl - 1.0, 0.0, kRelTol) << "ppl " << it->result.ppl << " oracle " << ppl;
    worst = std::max(worst, std::fabs(it->result.ppl / ppl - 1.0));
    ASSERT_EQ(it->result.buckets.size(), want.at("buckets").size());
    for (const BucketResult& b : it->result.buckets) {
      const double bp = want.at("buckets").at(std::to_string(b.from) + "-" + std::to_string(b.to)).at("ppl");
      EXPECT_NEAR(b.ppl / bp - 1.0, 0.0, kRelTol) << "bucket " << b.from << "-" << b.to << " " << b.ppl << " vs " << bp;
      worst = std::max(worst, std::fabs(b.ppl / bp - 1.0));
    }
  }
  EXPECT_GT(checked, 0);
  std::printf("[ oracle   ] %s: largest |ppl / oracle - 1| over %lld rows and their buckets: %.3g\n", name.c_str(),
              static_cast<long long>(checked), worst);
  ::testing::Test::RecordProperty("max_rel_deviation", std::to_string(worst));
}

TEST(FormatsOracleTest, Stories260KF32Gguf) { CheckFixture("stories260K-F32.gguf"); }
TEST(FormatsOracleTest, Stories260KF16Gguf) { CheckFixture("stories260K-F16.gguf"); }
TEST(FormatsOracleTest, Stories260KBf16Gguf) { CheckFixture("stories260K-BF16.gguf"); }
TEST(FormatsOracleTest, Stories260KQ4KMGguf) { CheckFixture("stories260K-Q4_K_M.gguf"); }
TEST(FormatsOracleTest, Stories260KQ6KGguf) { CheckFixture("stories260K-Q6_K.gguf"); }
TEST(FormatsOracleTest, Stories260KHf) { CheckFixture("stories260K-hf"); }
TEST(FormatsOracleTest, LlamaMiniRandHf) { CheckFixture("llama-mini-rand"); }
TEST(FormatsOracleTest, LlamaMiniRandBf16Gguf) { CheckFixture("llama-mini-rand-bf16.gguf"); }
TEST(FormatsOracleTest, LlamaMiniRandQ8Gguf) { CheckFixture("llama-mini-rand-q8_0.gguf"); }
TEST(FormatsOracleTest, LlamaMiniRandQ4KMGguf) { CheckFixture("llama-mini-rand-Q4_K_M.gguf"); }

TEST(FormatsOracleTest, EveryFixtureOfTheOracleIsCovered) {
  const nlohmann::json fixtures = testing::LoadTestJson("formats_ppl.json").at("fixtures");
  std::vector<std::string> names;
  for (const auto& [name, f] : fixtures.items()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"llama-mini-rand", "llama-mini-rand-Q4_K_M.gguf",
                                             "llama-mini-rand-bf16.gguf", "llama-mini-rand-q8_0.gguf",
                                             "stories260K-BF16.gguf", "stories260K-F16.gguf", "stories260K-F32.gguf",
                                             "stories260K-Q4_K_M.gguf", "stories260K-Q6_K.gguf", "stories260K-hf"}));
}

}  // namespace
}  // namespace posenc
