// The worker pool behind RunPieces: see parallel.h.
#include "posenc/model/layers/parallel.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace posenc::layers {
namespace {

thread_local bool t_in_pieces = false;

// Workers 1 .. n-1 of a dispatch; piece 0 runs on the caller. Workers wait for a new generation, run their piece if
// it has one, and report; the dispatcher waits until every worker with a piece has reported.
class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  void Run(int64_t pieces, const std::function<void(int64_t)>& fn) {
    std::lock_guard<std::mutex> one_dispatch(dispatch_mu_);
    while (static_cast<int64_t>(workers_.size()) < pieces - 1) {
      const int64_t index = static_cast<int64_t>(workers_.size()) + 1;
      workers_.emplace_back([this, index] { Work(index); });
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = &fn;
      pieces_ = pieces;
      remaining_ = pieces - 1;
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    t_in_pieces = true;
    fn(0);
    t_in_pieces = false;
    std::unique_lock<std::mutex> lk(mu_);
    done_.wait(lk, [&] { return remaining_ == 0; });
  }

 private:
  void Work(int64_t index) {
    t_in_pieces = true;
    uint64_t seen = 0;
    for (;;) {
      // A short spin first: the next region usually follows within microseconds.
      for (int spin = 0; spin < 1000 && generation_.load(std::memory_order_acquire) == seen; ++spin) {
        std::this_thread::yield();
      }
      const std::function<void(int64_t)>* fn;
      int64_t pieces;
      {
        std::unique_lock<std::mutex> lk(mu_);
        wake_.wait(lk, [&] { return generation_.load(std::memory_order_relaxed) != seen; });
        if (stop_) return;
        seen = generation_.load(std::memory_order_relaxed);
        fn = fn_;
        pieces = pieces_;
      }
      if (index >= pieces) continue;
      (*fn)(index);
      std::lock_guard<std::mutex> lk(mu_);
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  std::mutex dispatch_mu_;  // one dispatch at a time
  std::mutex mu_;           // guards everything below
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t)>* fn_ = nullptr;
  int64_t pieces_ = 0;
  int64_t remaining_ = 0;
  std::atomic<uint64_t> generation_{0};
  bool stop_ = false;
};

}  // namespace

bool InPieces() { return t_in_pieces; }

void RunPieces(int64_t pieces, const std::function<void(int64_t)>& fn) {
  if (pieces <= 1 || t_in_pieces) {
    for (int64_t k = 0; k < pieces; ++k) fn(k);
    return;
  }
  static Pool pool;
  pool.Run(pieces, fn);
}

}  // namespace posenc::layers
