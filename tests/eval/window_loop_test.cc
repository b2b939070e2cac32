// ForEachWindow's threads: --threads 1 is one thread in all (the products and attention inside included), one
// window gets every thread asked for inside it, several windows run one per thread with the work inside
// single-threaded; the process's defaults (OpenMP's team size, OpenBLAS's threads) are as before afterwards; the
// first error is rethrown with its type.
#include "posenc/eval/window_loop.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

struct Seen {
  int max_threads = 0;  // omp_get_max_threads() inside score: what a region inside would get
  bool in_parallel = false;
  int blas_threads = 0;
};

std::vector<Seen> RunWindows(int64_t n_windows, int n_threads) {
  std::vector<Seen> seen(static_cast<size_t>(n_windows));
  ForEachWindow(n_windows, n_threads, 4, {}, [&](int64_t i, ForwardState&, std::vector<float>& logits) {
    EXPECT_EQ(logits.size(), 4u);
    seen[static_cast<size_t>(i)] = {omp_get_max_threads(), omp_in_parallel() != 0, BlasThreads()};
  });
  return seen;
}

TEST(WindowLoop, ThreadsInsideAndDefaultsAfter) {
  const int default_threads = omp_get_max_threads();
  SetBlasThreads(3);
  for (const Seen& s : RunWindows(3, 1)) {  // --threads 1: one thread everywhere
    EXPECT_EQ(s.max_threads, 1);
    EXPECT_FALSE(s.in_parallel);
    if (BlasThreads() != 1) {  // a BLAS without thread control reports 1
      EXPECT_EQ(s.blas_threads, 1);
    }
  }
  for (const Seen& s : RunWindows(1, 2)) {  // one window: both threads inside it
    EXPECT_EQ(s.max_threads, 2);
    EXPECT_FALSE(s.in_parallel);
    if (BlasThreads() != 1) {
      EXPECT_EQ(s.blas_threads, 2);
    }
  }
  for (const Seen& s : RunWindows(4, 2)) EXPECT_TRUE(s.in_parallel);  // windows on a team of two
  EXPECT_EQ(omp_get_max_threads(), default_threads);
  if (BlasThreads() != 1) {
    EXPECT_EQ(BlasThreads(), 3);
  }
  SetBlasThreads(1);
}

TEST(WindowLoop, FirstErrorKeepsItsTypeAndProgressIsReported) {
  for (int threads : {1, 2}) {
    std::vector<int64_t> done;
    std::mutex mu;
    EXPECT_THROW(ForEachWindow(5, threads, 0,
                               [&](int64_t d, int64_t n) {
                                 std::lock_guard<std::mutex> lock(mu);
                                 EXPECT_EQ(n, 5);
                                 done.push_back(d);
                               },
                               [](int64_t i, ForwardState&, std::vector<float>&) {
                                 if (i == 3) throw NumericError("window 3");
                               }),
                 NumericError);
    EXPECT_LE(done.size(), 4u);
    for (size_t k = 0; k < done.size(); ++k) EXPECT_EQ(done[k], static_cast<int64_t>(k + 1));
  }
  std::atomic<int> calls{0};
  ForEachWindow(0, 2, 0, {}, [&](int64_t, ForwardState&, std::vector<float>&) { ++calls; });
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace posenc
