#include "posenc/eval/window_loop.h"

#include <atomic>
#include <exception>
#include <mutex>

#include <omp.h>

namespace posenc {

void ForEachWindow(int64_t n_windows, int n_threads, int64_t logit_floats,
                   const std::function<void(int64_t, int64_t)>& on_window,
                   const std::function<void(int64_t, ForwardState&, std::vector<float>&)>& score) {
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
