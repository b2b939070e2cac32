#include "posenc/dist/mpi/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr size_t kMaxPiece = size_t{1} << 30;  // bytes per MPI message (counts are int)
constexpr int kExchangeTag = 7001;

std::string MpiErrorString(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return fmt::format("MPI error {}", rc);
  return std::string(text, static_cast<size_t>(len));
}

}  // namespace

MpiSession::MpiSession(int* argc, char*** argv) {
  int provided = 0;
  const int rc = MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  if (rc != MPI_SUCCESS) throw DistError(fmt::format("MPI_Init_thread failed: {}", MpiErrorString(rc)));
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  if (provided < MPI_THREAD_FUNNELED) {
    Abort(fmt::format("MPI provides thread level {}, posenc needs MPI_THREAD_FUNNELED", provided));
  }
}

MpiSession::~MpiSession() { MPI_Finalize(); }

void MpiSession::Abort(const std::string& message, int code) {
  const std::string prefix = fmt::format("rank {}: ", rank_);  // DistError messages already start with it
  std::fprintf(stderr, "posenc: %s%s\n", message.rfind(prefix, 0) == 0 ? "" : prefix.c_str(), message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; this is for an MPI that does
}

void MpiCommunicator::set_timeout_s(double timeout_s) {
  if (!(std::isfinite(timeout_s) && timeout_s > 0)) {
    throw ConfigError(fmt::format("MPI timeout must be finite and > 0 s, got {}", timeout_s));
  }
  timeout_s_ = timeout_s;
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, double timeout_s) : comm_(comm), timeout_s_(timeout_s) {
  if (!(timeout_s > 0)) throw ConfigError(fmt::format("MPI timeout must be > 0 s, got {}", timeout_s));
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  Check(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
  Check(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
}

void MpiCommunicator::Check(int rc, const char* what) const {
  if (rc != MPI_SUCCESS) throw DistError(fmt::format("rank {}: {} failed: {}", rank_, what, MpiErrorString(rc)));
}

void MpiCommunicator::StartExchange(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int src) {
  if (!recv_requests_.empty() || !send_requests_.empty()) {
    throw DistError(fmt::format("rank {}: StartExchange while an exchange is pending", rank_));
  }
  for (const int peer : {dest, src}) {
    if (peer < 0 || peer >= size_) throw DistError(fmt::format("rank {}: peer rank {} outside [0, {})", rank_, peer, size_));
  }
  recv_peer_ = src;
  send_peer_ = dest;
  // Receives first, so a large message never waits for its matching receive to be posted. One message per
  // piece of at most kMaxPiece bytes (at least one, possibly empty); pieces of a pair arrive in order.
  size_t off = 0;
  do {
    const int n = static_cast<int>(std::min(kMaxPiece, recv.size() - off));
    recv_requests_.emplace_back();
    recv_sizes_.push_back(n);
    Check(MPI_Irecv(recv.data() + off, n, MPI_BYTE, src, kExchangeTag, comm_, &recv_requests_.back()), "MPI_Irecv");
    off += kMaxPiece;
  } while (off < recv.size());
  off = 0;
  do {
    const int n = static_cast<int>(std::min(kMaxPiece, send.size() - off));
    send_requests_.emplace_back();
    Check(MPI_Isend(send.data() + off, n, MPI_BYTE, dest, kExchangeTag, comm_, &send_requests_.back()), "MPI_Isend");
    off += kMaxPiece;
  } while (off < send.size());
}

void MpiCommunicator::Progress() {
  // A completed request becomes MPI_REQUEST_NULL and a later test returns an empty status, so the receive's
  // statuses are kept from the test that completed it.
  int done = 0;
  if (!recv_requests_.empty()) {
    recv_statuses_.resize(recv_requests_.size());
    Check(MPI_Testall(static_cast<int>(recv_requests_.size()), recv_requests_.data(), &done, recv_statuses_.data()),
          "MPI_Testall");
    if (done) CheckReceived();
  }
  if (!send_requests_.empty()) {
    Check(MPI_Testall(static_cast<int>(send_requests_.size()), send_requests_.data(), &done, MPI_STATUSES_IGNORE),
          "MPI_Testall");
    if (done) send_requests_.clear();
  }
}

void MpiCommunicator::FinishExchange() {
  if (!recv_requests_.empty()) {
    recv_statuses_.resize(recv_requests_.size());
    WaitAll(recv_requests_, recv_peer_, "K/V block", recv_statuses_.data());
    CheckReceived();
  }
  WaitAll(send_requests_, send_peer_, "acknowledgement of the K/V block sent to it");
}

void MpiCommunicator::CheckReceived() {
  for (size_t i = 0; i < recv_statuses_.size(); ++i) {
    int got = 0;
    Check(MPI_Get_count(&recv_statuses_[i], MPI_BYTE, &got), "MPI_Get_count");
    if (got != recv_sizes_[i]) {
      throw DistError(fmt::format("rank {}: expected a piece of {} bytes from rank {}, got {} (the ranks split the "
                                  "window differently)",
                                  rank_, recv_sizes_[i], recv_peer_, got));
    }
  }
  recv_requests_.clear();
  recv_sizes_.clear();
}

void MpiCommunicator::WaitAll(std::vector<MPI_Request>& requests, int peer, const char* what,
                              MPI_Status* statuses) {
  if (requests.empty()) return;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    int done = 0;
    Check(MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                      statuses != nullptr ? statuses : MPI_STATUSES_IGNORE),
          "MPI_Testall");
    if (done) {
      requests.clear();
      return;
    }
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (waited > timeout_s_) {
      const std::string who = peer >= 0 ? fmt::format("rank {}", peer) : "a peer";
      throw DistError(fmt::format("rank {}: no {} from {} within {} s ({} has died, hangs, or runs different "
                                  "options)",
                                  rank_, what, who, timeout_s_, who));
    }
    // Spin for the first millisecond (a transfer in flight finishes in microseconds to milliseconds), then sleep
    // between polls so a rank waiting for a slow peer leaves the core to ranks that compute.
    if (waited > 1e-3) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

std::vector<std::vector<std::byte>> MpiCommunicator::Gather(std::span<const std::byte> mine, int root) {
  if (mine.size() > static_cast<size_t>(INT_MAX)) {
    throw DistError(fmt::format("rank {}: {} bytes to gather exceed MPI's int count", rank_, mine.size()));
  }
  const int n = static_cast<int>(mine.size());
  std::vector<int> sizes(static_cast<size_t>(root == rank_ ? size_ : 0));
  std::vector<MPI_Request> req(1);
  Check(MPI_Igather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, root, comm_, req.data()), "MPI_Igather");
  WaitAll(req, root == rank_ ? -1 : root, "gather of result sizes");
  std::vector<int> displs(sizes.size());
  int64_t total = 0;
  for (size_t r = 0; r < sizes.size(); ++r) {
    displs[r] = static_cast<int>(total);
    total += sizes[r];
    if (total > INT_MAX) throw DistError(fmt::format("rank {}: gathered results exceed 2 GiB", rank_));
  }
  std::vector<std::byte> all(static_cast<size_t>(total));
  req.assign(1, MPI_REQUEST_NULL);
  Check(MPI_Igatherv(mine.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, root, comm_,
                     req.data()),
        "MPI_Igatherv");
  WaitAll(req, root == rank_ ? -1 : root, "gather of results");
  std::vector<std::vector<std::byte>> out(sizes.size());
  for (size_t r = 0; r < sizes.size(); ++r) {
    out[r].assign(all.begin() + displs[r], all.begin() + displs[r] + sizes[r]);
  }
  return out;
}

std::vector<uint64_t> MpiCommunicator::AllGather(uint64_t mine) {
  std::vector<uint64_t> all(static_cast<size_t>(size_));
  std::vector<MPI_Request> req(1);
  Check(MPI_Iallgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, comm_, req.data()), "MPI_Iallgather");
  WaitAll(req, -1, "all-gather");
  return all;
}

}  // namespace posenc
