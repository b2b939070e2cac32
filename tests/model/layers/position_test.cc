// Absolute position tables: forward adds row t to token t of every sequence; backward sums the sequences into
// the table gradient (float32 bit-exact against plain loops in the same order); ctx past the table is an error.
#include "posenc/model/layers/position.h"

#include <gtest/gtest.h>

#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

TEST(PositionTableTest, ForwardAndBackwardMatchPlainLoopsBitForBit) {
  const int64_t rows = 9, C = 13, B = 3, T = 7;
  const std::vector<double> t = testing::Uniform(rows * C, 1), x0 = testing::Uniform(B * T * C, 2),
                            g = testing::Uniform(B * T * C, 3), d0 = testing::Uniform(rows * C, 4);
  std::vector<float> table(t.begin(), t.end()), x(x0.begin(), x0.end()), dx(g.begin(), g.end()),
      dtable(d0.begin(), d0.end());
  std::vector<float> ex = x, ed = dtable;
  PositionTableForward<float>(table.data(), rows, C, B, T, x.data());
  PositionTableBackward<float>(dx.data(), rows, C, B, T, dtable.data());
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t c = 0; c < C; ++c) {
        ex[(b * T + i) * C + c] += table[i * C + c];
        ed[i * C + c] += dx[(b * T + i) * C + c];
      }
    }
  }
  EXPECT_TRUE(x == ex);
  EXPECT_TRUE(dtable == ed);
  std::vector<double> td(t), xd(x0), dd(rows * C, 0.0);
  PositionTableForward<double>(td.data(), rows, C, B, T, xd.data());
  PositionTableBackward<double>(g.data(), rows, C, B, T, dd.data());
  for (int64_t i = 0; i < B * T * C; ++i) EXPECT_EQ(xd[i], x0[i] + t[(i / C) % T * C + i % C]);
}

TEST(PositionTableTest, ContextLongerThanTheTableIsARangeError) {
  std::vector<float> table(4 * 2), x(5 * 2);
  try {
    PositionTableForward<float>(table.data(), 4, 2, 1, 5, x.data());
    FAIL() << "no error";
  } catch (const RangeError& e) {
    EXPECT_NE(std::string(e.what()).find("ctx = 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("has 4 rows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(PositionTableBackward<float>(x.data(), 4, 2, 1, 5, table.data()), RangeError);
  EXPECT_THROW(PositionTableForward<float>(table.data(), 4, 0, 1, 2, x.data()), ShapeError);
}

}  // namespace
}  // namespace posenc
