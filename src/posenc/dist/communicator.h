// The few collective and point-to-point operations distributed eval needs, behind one interface: MPI implements
// it for real ranks (dist/mpi/mpi_communicator.h), InProcessGroup for ranks simulated by threads (in_process.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace posenc {

/// One rank's endpoint in a group of size() ranks numbered 0 .. size() - 1. Every call is made by one thread of
/// the rank. Messages between a pair of ranks are delivered in the order they were started (MPI's
/// non-overtaking rule), so calls made in the same order on every rank match up.
///
/// Errors: every operation throws DistError (core/errors.h) when the transport fails, another rank has failed or
/// the peer did not answer within the implementation's timeout; the message names this rank and the peer.
class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Starts sending `send` to rank `dest` and receiving exactly recv.size() bytes from rank `src` into `recv`,
  /// and returns without waiting (MPI_Isend / MPI_Irecv). Until FinishExchange returns, `send` must stay
  /// unchanged (it may still be read) and `recv` must not be touched. One exchange at a time per rank.
  virtual void StartExchange(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int src) = 0;

  /// Lets the transport move data while the caller computes between StartExchange and FinishExchange (MPI
  /// implementations progress large messages only inside MPI calls). Cheap; call it now and then.
  virtual void Progress() {}

  /// Waits until the exchange started last is complete: `recv` holds the peer's bytes and `send` may be reused.
  /// Errors: DistError if the peer sent a different number of bytes, failed, or timed out.
  virtual void FinishExchange() = 0;

  /// Gathers every rank's bytes on `root`: there, element r is rank r's buffer (any sizes); elsewhere empty.
  virtual std::vector<std::vector<std::byte>> Gather(std::span<const std::byte> mine, int root) = 0;

  /// Every rank's value, on every rank (element r from rank r).
  virtual std::vector<uint64_t> AllGather(uint64_t mine) = 0;
};

}  // namespace posenc
