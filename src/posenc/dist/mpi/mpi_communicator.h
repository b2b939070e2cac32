// The MPI transport: a Communicator over an MPI communicator (nonblocking point-to-point and collectives, with
// timeouts), and the process-wide MPI session. Built only when CMake finds MPI (POSENC_WITH_MPI).
#pragma once

#include <mpi.h>

#include <string>
#include <vector>

#include "posenc/dist/communicator.h"

namespace posenc {

/// MPI_Init_thread (MPI_THREAD_FUNNELED: only the thread that created the session calls MPI) for the life of
/// the object, then MPI_Finalize. MPI_COMM_WORLD's error handler is set to MPI_ERRORS_RETURN, so MPI failures
/// come back as DistError instead of aborting without a word.
/// Errors: DistError if MPI cannot start or gives less than MPI_THREAD_FUNNELED.
class MpiSession {
 public:
  MpiSession(int* argc, char*** argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  /// Ends the whole job from this rank: prints "posenc: rank r: <message>" on stderr and calls MPI_Abort on
  /// MPI_COMM_WORLD with `code` (mpirun then stops every other rank and reports the failing one).
  [[noreturn]] void Abort(const std::string& message, int code = 1);

 private:
  int rank_ = 0;
  int size_ = 1;
};

/// A Communicator over an MPI communicator (MPI_COMM_WORLD by default).
/// Exchanges: MPI_Irecv + MPI_Isend (messages over 1 GiB split into 1 GiB pieces); Progress() is MPI_Testall
/// (Open MPI moves large messages only inside MPI calls); FinishExchange polls MPI_Testall until done or
/// timeout_s has passed. Gather and AllGather use the nonblocking collectives (MPI_Igather + MPI_Igatherv,
/// MPI_Iallgather) polled the same way.
/// Errors: DistError "rank r: ..." naming the peer and MPI's error string, or, on timeout, "rank r: no data from
/// rank q within T s (rank q has died, hangs, or runs different options)".
class MpiCommunicator : public Communicator {
 public:
  explicit MpiCommunicator(MPI_Comm comm = MPI_COMM_WORLD, double timeout_s = 600.0);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// How long every later wait polls before it gives up (seconds). Errors: ConfigError unless finite and > 0.
  void set_timeout_s(double timeout_s);
  void StartExchange(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int src) override;
  void Progress() override;
  void FinishExchange() override;
  std::vector<std::vector<std::byte>> Gather(std::span<const std::byte> mine, int root) override;
  std::vector<uint64_t> AllGather(uint64_t mine) override;

 private:
  // Polls until every request is complete (statuses, if given, [requests.size()]); on timeout throws naming
  // `peer` (-1: "a peer") and `what`.
  void WaitAll(std::vector<MPI_Request>& requests, int peer, const char* what, MPI_Status* statuses = nullptr);
  void Check(int rc, const char* what) const;
  // Checks each completed receive piece's byte count, then forgets the receive.
  void CheckReceived();

  MPI_Comm comm_;
  double timeout_s_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Request> recv_requests_, send_requests_;
  std::vector<int> recv_sizes_;  // bytes expected in each piece of the pending receive
  std::vector<MPI_Status> recv_statuses_;
  int recv_peer_ = -1, send_peer_ = -1;
};

}  // namespace posenc
