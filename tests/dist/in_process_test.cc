// The in-process communicator: ring exchanges, gather and all-gather deliver exactly what was sent, in order;
// a failing rank ends the others' waits with an error naming it instead of a hang.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/dist/in_process.h"

namespace posenc {
namespace {

TEST(InProcessTest, RingExchangeGatherAndAllGather) {
  for (int n = 1; n <= 4; ++n) {
    RunInProcess(n, [n](Communicator& comm) {
      const int r = comm.rank();
      ASSERT_EQ(comm.size(), n);
      // Three ring steps: rank r sends (r, step) to r + 1 and receives (r - 1, step) from r - 1.
      for (int step = 0; step < 3; ++step) {
        const int send[2] = {r, step};
        int recv[2] = {-1, -1};
        comm.StartExchange(std::as_bytes(std::span<const int>(send)), (r + 1) % n,
                           std::as_writable_bytes(std::span<int>(recv)), (r - 1 + n) % n);
        comm.Progress();
        comm.FinishExchange();
        EXPECT_EQ(recv[0], (r - 1 + n) % n);
        EXPECT_EQ(recv[1], step);
      }
      // Gather buffers of different sizes on rank 1 (or 0 when alone).
      const int root = n > 1 ? 1 : 0;
      const std::string mine(static_cast<size_t>(r + 1), static_cast<char>('a' + r));
      const auto all = comm.Gather(std::as_bytes(std::span<const char>(mine.data(), mine.size())), root);
      if (r == root) {
        ASSERT_EQ(all.size(), static_cast<size_t>(n));
        for (int q = 0; q < n; ++q) {
          EXPECT_EQ(std::string(reinterpret_cast<const char*>(all[q].data()), all[q].size()),
                    std::string(static_cast<size_t>(q + 1), static_cast<char>('a' + q)));
        }
      } else {
        EXPECT_TRUE(all.empty());
      }
      const std::vector<uint64_t> values = comm.AllGather(100 + static_cast<uint64_t>(r));
      ASSERT_EQ(values.size(), static_cast<size_t>(n));
      for (int q = 0; q < n; ++q) EXPECT_EQ(values[q], 100u + static_cast<uint64_t>(q));
    });
  }
}

TEST(InProcessTest, WrongSizeIsAnError) {
  EXPECT_THROW(RunInProcess(2, [](Communicator& comm) {
                 std::vector<std::byte> send(static_cast<size_t>(8 + comm.rank())), recv(8);
                 comm.StartExchange(send, 1 - comm.rank(), recv, 1 - comm.rank());
                 comm.FinishExchange();
               }),
               DistError);
}

TEST(InProcessTest, AFailingRankEndsTheOthersWaitsNamingIt) {
  std::atomic<int> stopped{0};
  try {
    RunInProcess(3, [&](Communicator& comm) {
      if (comm.rank() == 1) throw ConfigError("rank one's input is bad");
      std::vector<std::byte> send(4), recv(4);
      comm.StartExchange(send, (comm.rank() + 1) % 3, recv, (comm.rank() + 2) % 3);
      try {
        comm.FinishExchange();  // rank 2 waits for rank 1, which never sends
        comm.AllGather(0);      // rank 0 gets rank 2's block, then waits here for rank 1
      } catch (const DistError& e) {
        EXPECT_NE(std::string(e.what()).find("rank 1 failed: rank one's input is bad"), std::string::npos)
            << e.what();
        ++stopped;
        throw;
      }
    });
    FAIL() << "no exception";
  } catch (const ConfigError& e) {  // the first failure, rethrown as it was
    EXPECT_STREQ(e.what(), "rank one's input is bad");
  }
  EXPECT_EQ(stopped.load(), 2);
}

TEST(InProcessTest, RefusesBadGroups) {
  EXPECT_THROW(InProcessGroup(0), ConfigError);
  EXPECT_THROW(InProcessGroup(2, 0.0), ConfigError);
}

}  // namespace
}  // namespace posenc
