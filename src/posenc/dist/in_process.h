// Ranks simulated by threads of one process: a Communicator over in-memory mailboxes, so the distributed code
// (ring attention, data-parallel eval) runs and is tested without MPI.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "posenc/dist/communicator.h"

namespace posenc {

/// A group of n_ranks in-process endpoints. Sends are buffered (copied at StartExchange / Gather / AllGather),
/// receives block until the message is there. Messages between a pair of ranks arrive in the order sent.
class InProcessGroup {
 public:
  /// timeout_s: how long a receive waits before DistError ("rank r: nothing from rank q within T s").
  /// Errors: ConfigError if n_ranks < 1 or timeout_s <= 0.
  explicit InProcessGroup(int n_ranks, double timeout_s = 120.0);
  ~InProcessGroup();
  InProcessGroup(const InProcessGroup&) = delete;
  InProcessGroup& operator=(const InProcessGroup&) = delete;

  int size() const;
  /// The endpoint of `rank`; use it from one thread. Precondition: 0 <= rank < size().
  Communicator& comm(int rank);

  /// Marks the group failed because `rank` failed with `why`: every receive, pending or later, on any other rank
  /// throws DistError "rank q: stopped because rank r failed: why". The first failure is kept.
  void Fail(int rank, const std::string& why);

 private:
  struct Shared;
  class Endpoint;
  std::unique_ptr<Shared> shared_;
};

/// Runs body(comm) for every rank of a new InProcessGroup, each on its own thread, and waits for all. The BLAS
/// library is set to one thread meanwhile (so the ranks' tile products neither oversubscribe the cores nor
/// depend on a thread count).
/// Errors: if a rank's body throws, the group fails (the other ranks' receives throw, so nobody hangs) and, once
/// every thread has ended, the exception of the rank that failed first is rethrown as it was (its type kept).
void RunInProcess(int n_ranks, const std::function<void(Communicator&)>& body, double timeout_s = 120.0);

}  // namespace posenc
