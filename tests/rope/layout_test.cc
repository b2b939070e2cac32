// Reordering half-split pairs into interleaved pairs: the channel map on rows of several values, channels past
// rotary_dim untouched, and the invariant it exists for (q . k unchanged when both are reordered).
#include "posenc/rope/layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace posenc {
namespace {

TEST(RopeLayoutTest, HalfSplitRowsBecomeInterleavedPairs) {
  // Two heads of head_dim 6, rotary_dim 4, each channel a row of 2 values: value = 100 head + 10 channel + col.
  const int64_t n_heads = 2, head_dim = 6, rotary_dim = 4, cols = 2;
  std::vector<float> x;
  for (int h = 0; h < n_heads; ++h) {
    for (int ch = 0; ch < head_dim; ++ch) {
      for (int col = 0; col < cols; ++col) x.push_back(static_cast<float>(100 * h + 10 * ch + col));
    }
  }
  HalfSplitToInterleaved(x.data(), n_heads, head_dim, rotary_dim, cols);
  // Pairs (0, 2) and (1, 3) become (0, 1) and (2, 3): new channel order 0, 2, 1, 3, then 4, 5 as they were.
  const int order[6] = {0, 2, 1, 3, 4, 5};
  for (int h = 0; h < n_heads; ++h) {
    for (int ch = 0; ch < head_dim; ++ch) {
      for (int col = 0; col < cols; ++col) {
        EXPECT_EQ(x[static_cast<size_t>((h * head_dim + ch) * cols + col)],
                  static_cast<float>(100 * h + 10 * order[ch] + col))
            << "head " << h << " channel " << ch << " col " << col;
      }
    }
  }
}

TEST(RopeLayoutTest, DotProductsAreUnchanged) {
  std::vector<float> q = {1.5f, -2.0f, 0.25f, 3.0f, -1.0f, 0.5f, 2.0f, -0.75f};
  std::vector<float> k = {0.5f, 1.0f, -2.5f, 0.75f, 2.0f, -1.5f, 0.25f, 1.25f};
  auto dot = [&] {
    float s = 0;
    for (size_t i = 0; i < q.size(); ++i) s += q[i] * k[i];
    return s;
  };
  const float before = dot();
  HalfSplitToInterleaved(q.data(), 1, 8, 8);
  HalfSplitToInterleaved(k.data(), 1, 8, 8);
  EXPECT_NE(q[1], -2.0f);  // reordered
  EXPECT_EQ(dot(), before);  // small integers and halves: every product and sum exact in float32
}

}  // namespace
}  // namespace posenc
