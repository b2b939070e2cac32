#include "posenc/eval/window_loop.h"

#include <atomic>
#include <exception>
#include <mutex>

#include <omp.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/threads.h"

namespace posenc {

void ForEachWindow(int64_t n_windows, int n_threads, int64_t logit_floats,
                   const std::function<void(int64_t, int64_t)>& on_window,
                   const std::function<void(int64_t, ForwardState&, std::vector<float>&)>& score) {
  if (n_windows <= 0) return;
  if (n_windows == 1 || n_threads <= 1) {
    // One item at a time on this thread, whose products and attention take up to n_threads threads (their
    // regions use the default team size, set to n_threads meanwhile): --threads 1 is one thread throughout,
    // and a single window still gets every thread asked for.
    const ScopedDefaultThreads scoped(n_threads);
    const ScopedBlasThreads blas(n_threads);
    ForwardState state;
    std::vector<float> logits(static_cast<size_t>(logit_floats));
    for (int64_t i = 0; i < n_windows; ++i) {
      score(i, state, logits);
      if (on_window) on_window(i + 1, n_windows);
    }
    return;
  }
  // Items on a team of threads: the forward passes inside run single-threaded (omp_in_parallel()).
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  std::mutex mu;
  int64_t done = 0;
#pragma omp parallel num_threads(n_threads)
  {
    ForwardState state;
    std::vector<float> logits(static_cast<size_t>(logit_floats));
#pragma omp for schedule(dynamic, 1)
    for (int64_t i = 0; i < n_windows; ++i) {
      if (failed.load()) continue;
      try {
        score(i, state, logits);
        std::lock_guard<std::mutex> lock(mu);
        ++done;
        if (on_window) on_window(done, n_windows);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace posenc
