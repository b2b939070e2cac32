// MakeContextSplit: every position held exactly once, chunk sizes, the zigzag assignment and its balance of
// causal work (exact counts, from the closed form of sum p + 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "posenc/attention/context_split.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

// Every position of [0, L) is held by exactly one rank; ranges ascend and are non-empty.
void ExpectPartition(const ContextSplit& s) {
  std::vector<int> held(static_cast<size_t>(s.n_tokens), 0);
  for (int r = 0; r < s.n_ranks(); ++r) {
    const auto& mine = s.ranges[static_cast<size_t>(r)];
    ASSERT_FALSE(mine.empty()) << "rank " << r;
    for (size_t i = 0; i < mine.size(); ++i) {
      EXPECT_GT(mine[i].size(), 0);
      if (i > 0) {
        EXPECT_GE(mine[i].begin, mine[i - 1].end);
      }
      for (int64_t p = mine[i].begin; p < mine[i].end; ++p) ++held[static_cast<size_t>(p)];
    }
  }
  for (int64_t p = 0; p < s.n_tokens; ++p) EXPECT_EQ(held[static_cast<size_t>(p)], 1) << "position " << p;
}

TEST(ContextSplitTest, EveryPositionOnceForUnevenSizes) {
  for (ContextSplitKind kind : {ContextSplitKind::kContiguous, ContextSplitKind::kZigzag}) {
    for (int n = 1; n <= 5; ++n) {
      for (int64_t L : {int64_t{n}, int64_t{n + 1}, int64_t{2 * n - 1}, int64_t{77}, int64_t{1000}}) {
        SCOPED_TRACE(::testing::Message() << ContextSplitName(kind) << " N " << n << " L " << L);
        const ContextSplit s = MakeContextSplit(L, n, kind);
        EXPECT_EQ(s.n_ranks(), n);
        ExpectPartition(s);
        int64_t total = 0;
        for (int r = 0; r < n; ++r) total += s.Count(r);
        EXPECT_EQ(total, L);
      }
    }
  }
}

TEST(ContextSplitTest, ZigzagTakesChunkRAndItsMirror) {
  // L = 80, N = 4: 8 chunks of 10; rank 1 holds chunks 1 and 6.
  const ContextSplit s = MakeContextSplit(80, 4, ContextSplitKind::kZigzag);
  ASSERT_EQ(s.ranges[1].size(), 2u);
  EXPECT_EQ(s.ranges[1][0].begin, 10);
  EXPECT_EQ(s.ranges[1][0].end, 20);
  EXPECT_EQ(s.ranges[1][1].begin, 60);
  EXPECT_EQ(s.ranges[1][1].end, 70);
  // L = 13, N = 2: chunks 4, 3, 3, 3 (the first 13 % 4 = 1 chunk one longer): rank 0 = [0, 4) + [10, 13).
  const ContextSplit u = MakeContextSplit(13, 2, ContextSplitKind::kZigzag);
  EXPECT_EQ(u.ranges[0][0].end, 4);
  EXPECT_EQ(u.ranges[0][1].begin, 10);
  EXPECT_EQ(u.Count(0), 7);
  EXPECT_EQ(u.Count(1), 6);
}

TEST(ContextSplitTest, CausalWorkIsBalancedByZigzag) {
  // Chunk c of size C holds positions [cC, (c+1)C): sum of p + 1 = C^2 c + C (C + 1) / 2. Rank r's two chunks
  // r and 2N-1-r add up to C^2 (2N - 1) + C (C + 1), the same for every r.
  for (int n : {2, 3, 4, 8}) {
    const int64_t C = 16, L = 2 * n * C;
    const ContextSplit z = MakeContextSplit(L, n, ContextSplitKind::kZigzag);
    for (int r = 0; r < n; ++r) EXPECT_EQ(z.CausalPairs(r), C * C * (2 * n - 1) + C * (C + 1)) << "N " << n;
    // Contiguous: rank r holds [rB, (r+1)B), B = L / N: B^2 r + B (B + 1) / 2, so the last rank does
    // (B^2 (N-1) + B(B+1)/2) / (B(B+1)/2) ~ 2N - 1 times the first's work.
    const ContextSplit c = MakeContextSplit(L, n, ContextSplitKind::kContiguous);
    const int64_t B = L / n;
    for (int r = 0; r < n; ++r) EXPECT_EQ(c.CausalPairs(r), B * B * r + B * (B + 1) / 2);
  }
}

TEST(ContextSplitTest, RejectsAWindowShorterThanTheRanks) {
  EXPECT_THROW(MakeContextSplit(3, 4, ContextSplitKind::kZigzag), RangeError);
  EXPECT_THROW(MakeContextSplit(0, 1, ContextSplitKind::kContiguous), RangeError);
  EXPECT_THROW(MakeContextSplit(10, 0, ContextSplitKind::kZigzag), ConfigError);
  try {
    MakeContextSplit(3, 4, ContextSplitKind::kZigzag);
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("3 tokens is shorter than the 4 ranks"), std::string::npos) << e.what();
  }
  EXPECT_EQ(ParseContextSplit("zigzag"), ContextSplitKind::kZigzag);
  EXPECT_THROW(ParseContextSplit("ring"), ConfigError);
}

}  // namespace
}  // namespace posenc
