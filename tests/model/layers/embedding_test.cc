// Token embedding: gather, scatter-add with repeated tokens (float32 bit-exact against plain loops, which add in
// token order as the kernel does), float64 gradient by finite differences, bad ids.
#include "posenc/model/layers/embedding.h"

#include <gtest/gtest.h>

#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

TEST(EmbeddingTest, GatherAndScatterAddMatchPlainLoopsBitForBit) {
  const int64_t V = 37, C = 19;
  const std::vector<int32_t> tokens = {3, 0, 36, 3, 3, 17, 0, 5, 36, 3, 9, 9, 1};
  const int64_t n = static_cast<int64_t>(tokens.size());
  const std::vector<double> t = testing::Uniform(V * C, 1), d = testing::Uniform(n * C, 2), g0 = testing::Uniform(V * C, 3);
  std::vector<float> table(t.begin(), t.end()), dout(d.begin(), d.end()), out(n * C), dtable(g0.begin(), g0.end());
  std::vector<float> expect_dtable = dtable;
  EmbeddingForward<float>(tokens, table.data(), V, C, out.data());
  EmbeddingBackward<float>(tokens, dout.data(), V, C, dtable.data());
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t c = 0; c < C; ++c) {
      ASSERT_EQ(out[r * C + c], table[tokens[r] * C + c]);
      expect_dtable[tokens[r] * C + c] += dout[r * C + c];
    }
  }
  EXPECT_TRUE(dtable == expect_dtable);
}

TEST(EmbeddingTest, Float64GradientMatchesFiniteDifferences) {
  const int64_t V = 5, C = 3;
  const std::vector<int32_t> tokens = {1, 4, 1, 0};
  std::vector<double> table = testing::Uniform(V * C, 4), wy = testing::Uniform(tokens.size() * C, 5);
  auto loss = [&] {
    std::vector<double> out(tokens.size() * C);
    EmbeddingForward<double>(tokens, table.data(), V, C, out.data());
    double s = 0;
    for (size_t i = 0; i < out.size(); ++i) s += wy[i] * out[i] * out[i];  // nonlinear in the table
    return s;
  };
  std::vector<double> out(tokens.size() * C), dout(out.size()), d(table.size(), 0.0);
  EmbeddingForward<double>(tokens, table.data(), V, C, out.data());
  for (size_t i = 0; i < out.size(); ++i) dout[i] = 2 * wy[i] * out[i];
  EmbeddingBackward<double>(tokens, dout.data(), V, C, d.data());
  EXPECT_EQ(testing::CheckGradient("dtable", loss, testing::Pointers(table), d, 6), "");
}

TEST(EmbeddingTest, TokenOutsideTheVocabularyIsARangeErrorAndWritesNothing) {
  std::vector<float> table(6, 1.0f), out(6, -1.0f);
  const std::vector<int32_t> tokens = {0, 3};
  try {
    EmbeddingForward<float>(tokens, table.data(), 3, 2, out.data());
    FAIL() << "no error";
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("index 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("got 3"), std::string::npos) << e.what();
  }
  for (float v : out) EXPECT_EQ(v, -1.0f);
  const std::vector<int32_t> negative = {-1};
  EXPECT_THROW(EmbeddingBackward<float>(negative, out.data(), 3, 2, table.data()), RangeError);
  const std::vector<int32_t> valid = {0, 2};
  EXPECT_THROW(EmbeddingForward<float>(valid, nullptr, 3, 2, out.data()), ShapeError);
}

}  // namespace
}  // namespace posenc
