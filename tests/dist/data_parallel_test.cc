// Data-parallel work split and gather: the longest-processing-time assignment on known cases, and results on
// rank 0 bit-identical to a one-process loop (values and a fixed-order sum) for 1..4 simulated ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/dist/data_parallel.h"
#include "posenc/dist/in_process.h"

namespace posenc {
namespace {

TEST(DataParallelTest, LongestProcessingTimeAssignment) {
  // Costs 5, 4, 3, 3, 2 on 2 ranks: 5 -> r0, 4 -> r1, 3 (item 2) -> r1 (4 < 5), 3 (item 3) -> r0 (5 < 7),
  // 2 -> r0 (8 vs 7: r1). Loads 8 and 9.
  const std::vector<double> costs = {5, 4, 3, 3, 2};
  EXPECT_EQ(AssignItems(costs, 2), (std::vector<int>{0, 1, 1, 0, 1}));
  // Equal costs: round robin in item order.
  EXPECT_EQ(AssignItems(std::vector<double>(5, 1.0), 3), (std::vector<int>{0, 1, 2, 0, 1}));
  // More ranks than items: the first ranks get one each.
  EXPECT_EQ(AssignItems(std::vector<double>{2, 1}, 4), (std::vector<int>{0, 1}));
  EXPECT_THROW(AssignItems(costs, 0), ConfigError);
  EXPECT_THROW(AssignItems(std::vector<double>{1, NAN}, 2), ConfigError);
  EXPECT_THROW(AssignItems(std::vector<double>{-1}, 2), ConfigError);
}

// A window item's "per-position NLL": values whose sum depends on the order (mixed magnitudes), different lengths.
std::vector<double> Item(int64_t i) {
  std::vector<double> v(static_cast<size_t>(3 + i % 5));
  for (size_t t = 0; t < v.size(); ++t) v[t] = std::ldexp(1.0 + 0.1 * static_cast<double>(t), static_cast<int>(i % 7) * 9) / 3.0;
  return v;
}

double OrderedSum(const std::vector<std::vector<double>>& items) {
  double s = 0;
  for (const auto& v : items) {
    for (double x : v) s += x;
  }
  return s;
}

TEST(DataParallelTest, GatheredResultsAreBitIdenticalToOneProcess) {
  const int64_t n_items = 23;
  std::vector<double> costs(n_items);
  for (int64_t i = 0; i < n_items; ++i) costs[i] = static_cast<double>(1 + (i * 7) % 4) * 512.0;  // mixed ctx
  std::vector<std::vector<double>> serial;
  for (int64_t i = 0; i < n_items; ++i) serial.push_back(Item(i));
  for (int n = 1; n <= 4; ++n) {
    std::vector<std::vector<double>> gathered;
    std::vector<int64_t> computed(n_items, 0);
    RunInProcess(n, [&](Communicator& comm) {
      auto r = RunDataParallel(comm, costs, [&](int64_t i) {
        ++computed[i];  // each item is computed by exactly one rank (distinct elements: no race)
        return Item(i);
      });
      if (comm.rank() == 0) gathered = std::move(r);
      else EXPECT_TRUE(r.empty());
    });
    ASSERT_EQ(gathered.size(), serial.size());
    for (int64_t i = 0; i < n_items; ++i) {
      EXPECT_EQ(computed[i], 1) << "item " << i;
      ASSERT_EQ(gathered[i].size(), serial[i].size());
      EXPECT_EQ(std::memcmp(gathered[i].data(), serial[i].data(), serial[i].size() * sizeof(double)), 0);
    }
    const double a = OrderedSum(gathered), b = OrderedSum(serial);
    EXPECT_EQ(std::memcmp(&a, &b, sizeof a), 0) << "N " << n;
  }
}

TEST(DataParallelTest, AFailingItemStopsEveryRank) {
  EXPECT_THROW(RunInProcess(3, [](Communicator& comm) {
                 RunDataParallel(comm, std::vector<double>(6, 1.0), [](int64_t i) -> std::vector<double> {
                   if (i == 4) throw IoError("window 4 cannot be read");
                   return {1.0};
                 });
               }),
               IoError);
}

}  // namespace
}  // namespace posenc
