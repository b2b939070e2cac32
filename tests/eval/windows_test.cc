// Protocol step 2: window checks and position buckets (ref_llama2c.py `buckets_for`).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/eval/perplexity.h"
#include "posenc/eval/windows.h"

namespace posenc {
namespace {

std::vector<std::pair<int64_t, int64_t>> Buckets(int64_t ctx, int64_t l0) {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const PositionBucket& b : PositionBuckets(ctx, l0)) out.emplace_back(b.from, b.to);
  return out;
}

TEST(WindowsTest, PositionBuckets) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(Buckets(256, 512), (V{{0, 256}}));
  EXPECT_EQ(Buckets(512, 512), (V{{0, 256}, {256, 512}}));
  EXPECT_EQ(Buckets(2048, 512), (V{{0, 256}, {256, 512}, {512, 1024}, {1024, 2048}}));
  EXPECT_EQ(Buckets(768, 512), (V{{0, 256}, {256, 512}}));  // [512, 1024) is not inside [0, 768)
  EXPECT_EQ(Buckets(100, 512), (V{}));
  EXPECT_THROW(PositionBuckets(0, 512), ConfigError);
}

TEST(WindowsTest, ValidateWindowsErrorsNameTheProblem) {
  const std::vector<int64_t> ctx = {256, 512};
  EXPECT_NO_THROW(ValidateWindows(1025, 1024, ctx));
  auto message = [&](int64_t stream, int64_t n, std::vector<int64_t> c) {
    try {
      ValidateWindows(stream, n, c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(100000, 1000, ctx).find("tokens (N) = 1000 must be a multiple of every ctx; 1000 % 256 = 232"),
            std::string::npos);
  EXPECT_NE(message(1024, 1024, ctx).find("the text has 1024 tokens; N + 1 = 1025 are needed"), std::string::npos);
  EXPECT_NE(message(100, 0, ctx).find("tokens (N) must be > 0, got 0"), std::string::npos);
  EXPECT_NE(message(100, 64, {0}).find("ctx must be > 0, got 0"), std::string::npos);
}

TEST(WindowsTest, SummarizeNllBucketsByInWindowPosition) {
  // Two windows of 4 with L0 = 4: buckets [0, 2) and [2, 4); position of prediction i is i % 4.
  const std::vector<double> nll = {1, 2, 3, 4, 5, 6, 7, 8};
  const PerplexityResult r = SummarizeNll(nll, 4, 4);
  EXPECT_DOUBLE_EQ(r.mean_nll, 4.5);
  ASSERT_EQ(r.buckets.size(), 2u);
  EXPECT_DOUBLE_EQ(r.buckets[0].mean_nll, (1 + 2 + 5 + 6) / 4.0);
  EXPECT_DOUBLE_EQ(r.buckets[1].mean_nll, (3 + 4 + 7 + 8) / 4.0);
  EXPECT_DOUBLE_EQ(r.buckets[1].ppl, std::exp(5.5));
  EXPECT_EQ(r.buckets[0].count, 4);
}

TEST(WindowsTest, TokenNllIsFloat64LogSoftmax) {
  const std::vector<float> logits = {1.0f, 2.0f, 3.0f, -100.0f, 0.5f};
  double lse = 0;
  for (float z : logits) lse += std::exp(double(z));
  lse = std::log(lse);
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(TokenNll(logits.data(), 5, t), lse - logits[t], 1e-14);
  EXPECT_THROW(TokenNll(logits.data(), 5, 5), RangeError);
}

}  // namespace
}  // namespace posenc
