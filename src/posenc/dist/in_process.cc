#include "posenc/dist/in_process.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"

namespace posenc {

// What a message is for; a receive checks it (calls made in a different order on two ranks are a bug).
enum class MessageKind { kExchange, kGather, kAllGather };

struct Message {
  MessageKind kind;
  std::vector<std::byte> bytes;
};

struct InProcessGroup::Shared {
  int n_ranks;
  double timeout_s;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<Message>> mailbox;  // [src * n_ranks + dst]
  std::optional<int> failed_rank;
  std::string failed_why;
  std::vector<std::unique_ptr<Endpoint>> endpoints;

  void Post(int src, int dst, MessageKind kind, std::span<const std::byte> bytes) {
    {
      std::lock_guard<std::mutex> lock(mu);
      mailbox[static_cast<size_t>(src * n_ranks + dst)].push_back({kind, {bytes.begin(), bytes.end()}});
    }
    cv.notify_all();
  }

  Message Take(int src, int dst, MessageKind kind) {
    std::unique_lock<std::mutex> lock(mu);
    std::deque<Message>& box = mailbox[static_cast<size_t>(src * n_ranks + dst)];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (box.empty()) {
      if (failed_rank) {
        throw DistError(fmt::format("rank {}: stopped because rank {} failed: {}", dst, *failed_rank, failed_why));
      }
      if (cv.wait_until(lock, deadline) == std::cv_status::timeout && box.empty()) {
        throw DistError(fmt::format("rank {}: nothing from rank {} within {} s", dst, src, timeout_s));
      }
    }
    Message m = std::move(box.front());
    box.pop_front();
    if (m.kind != kind) {
      throw DistError(fmt::format("rank {}: rank {} sent a message of another operation (calls out of order)", dst,
                                  src));
    }
    return m;
  }
};

class InProcessGroup::Endpoint : public Communicator {
 public:
  Endpoint(Shared& shared, int rank) : sh_(shared), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return sh_.n_ranks; }

  void StartExchange(std::span<const std::byte> send, int dest, std::span<std::byte> recv, int src) override {
    if (pending_) throw DistError(fmt::format("rank {}: StartExchange while an exchange is pending", rank_));
    CheckPeer(dest);
    CheckPeer(src);
    sh_.Post(rank_, dest, MessageKind::kExchange, send);
    pending_ = true;
    recv_ = recv;
    src_ = src;
  }

  void FinishExchange() override {
    if (!pending_) throw DistError(fmt::format("rank {}: FinishExchange without StartExchange", rank_));
    pending_ = false;
    const Message m = sh_.Take(src_, rank_, MessageKind::kExchange);
    if (m.bytes.size() != recv_.size()) {
      throw DistError(fmt::format("rank {}: expected {} bytes from rank {}, got {}", rank_, recv_.size(), src_,
                                  m.bytes.size()));
    }
    if (!m.bytes.empty()) std::memcpy(recv_.data(), m.bytes.data(), m.bytes.size());
  }

  std::vector<std::vector<std::byte>> Gather(std::span<const std::byte> mine, int root) override {
    CheckPeer(root);
    if (rank_ != root) {
      sh_.Post(rank_, root, MessageKind::kGather, mine);
      return {};
    }
    std::vector<std::vector<std::byte>> all(static_cast<size_t>(sh_.n_ranks));
    for (int r = 0; r < sh_.n_ranks; ++r) {
      all[static_cast<size_t>(r)] =
          r == rank_ ? std::vector<std::byte>(mine.begin(), mine.end()) : sh_.Take(r, rank_, MessageKind::kGather).bytes;
    }
    return all;
  }

  std::vector<uint64_t> AllGather(uint64_t mine) override {
    const std::span<const std::byte> bytes = std::as_bytes(std::span<const uint64_t>(&mine, 1));
    for (int r = 0; r < sh_.n_ranks; ++r) {
      if (r != rank_) sh_.Post(rank_, r, MessageKind::kAllGather, bytes);
    }
    std::vector<uint64_t> all(static_cast<size_t>(sh_.n_ranks), mine);
    for (int r = 0; r < sh_.n_ranks; ++r) {
      if (r == rank_) continue;
      const Message m = sh_.Take(r, rank_, MessageKind::kAllGather);
      std::memcpy(&all[static_cast<size_t>(r)], m.bytes.data(), sizeof(uint64_t));
    }
    return all;
  }

 private:
  void CheckPeer(int peer) const {
    if (peer < 0 || peer >= sh_.n_ranks) {
      throw DistError(fmt::format("rank {}: peer rank {} is outside [0, {})", rank_, peer, sh_.n_ranks));
    }
  }

  Shared& sh_;
  const int rank_;
  bool pending_ = false;
  std::span<std::byte> recv_;
  int src_ = 0;
};

InProcessGroup::InProcessGroup(int n_ranks, double timeout_s) : shared_(std::make_unique<Shared>()) {
  if (n_ranks < 1) throw ConfigError(fmt::format("number of ranks must be >= 1, got {}", n_ranks));
  if (!(timeout_s > 0)) throw ConfigError(fmt::format("timeout must be > 0 s, got {}", timeout_s));
  shared_->n_ranks = n_ranks;
  shared_->timeout_s = timeout_s;
  shared_->mailbox.resize(static_cast<size_t>(n_ranks) * static_cast<size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r) shared_->endpoints.push_back(std::make_unique<Endpoint>(*shared_, r));
}

InProcessGroup::~InProcessGroup() = default;

int InProcessGroup::size() const { return shared_->n_ranks; }

Communicator& InProcessGroup::comm(int rank) { return *shared_->endpoints[static_cast<size_t>(rank)]; }

void InProcessGroup::Fail(int rank, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(shared_->mu);
    if (shared_->failed_rank) return;
    shared_->failed_rank = rank;
    shared_->failed_why = why;
  }
  shared_->cv.notify_all();
}

namespace {

std::string ExceptionMessage(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace

void RunInProcess(int n_ranks, const std::function<void(Communicator&)>& body, double timeout_s) {
  InProcessGroup group(n_ranks, timeout_s);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n_ranks));
  std::mutex order_mu;
  std::vector<int> failure_order;  // ranks in the order they failed
  const int saved_blas_threads = BlasThreads();
  SetBlasThreads(1);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n_ranks; ++r) {
      threads.emplace_back([&, r] {
        try {
          body(group.comm(r));
        } catch (...) {
          errors[static_cast<size_t>(r)] = std::current_exception();
          {
            std::lock_guard<std::mutex> lock(order_mu);
            failure_order.push_back(r);
          }
          group.Fail(r, ExceptionMessage(errors[static_cast<size_t>(r)]));
        }
      });
    }
  }  // jthreads join here
  SetBlasThreads(saved_blas_threads);
  if (!failure_order.empty()) std::rethrow_exception(errors[static_cast<size_t>(failure_order.front())]);
}

}  // namespace posenc
