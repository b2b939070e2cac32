#include "posenc/dist/data_parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

void Append(std::vector<std::byte>& out, const void* p, size_t n) {
  const std::byte* b = static_cast<const std::byte*>(p);
  out.insert(out.end(), b, b + n);
}

// Reads n bytes at `offset` from a gathered message, checking its length.
void Read(const std::vector<std::byte>& in, size_t& offset, void* dst, size_t n, int from) {
  if (n > in.size() || offset > in.size() - n) {
    throw DistError(fmt::format("rank 0: the results of rank {} are truncated ({} bytes)", from, in.size()));
  }
  std::memcpy(dst, in.data() + offset, n);
  offset += n;
}

}  // namespace

std::vector<int> AssignItems(std::span<const double> costs, int n_ranks) {
  if (n_ranks < 1) throw ConfigError(fmt::format("number of ranks must be >= 1, got {}", n_ranks));
  for (size_t i = 0; i < costs.size(); ++i) {
    if (!std::isfinite(costs[i]) || costs[i] < 0) {
      throw ConfigError(fmt::format("cost of work item {} must be finite and >= 0, got {}", i, costs[i]));
    }
  }
  std::vector<size_t> order(costs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
  std::vector<double> load(static_cast<size_t>(n_ranks), 0.0);
  std::vector<int> owner(costs.size(), 0);
  for (const size_t i : order) {
    const int r = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());  // first minimum
    owner[i] = r;
    load[static_cast<size_t>(r)] += costs[i];
  }
  return owner;
}

std::vector<std::vector<double>> RunDataParallel(Communicator& comm, std::span<const double> costs,
                                                 const std::function<std::vector<double>(int64_t item)>& compute) {
  return RunDataParallelBatch(comm, costs, [&](std::span<const int64_t> items) {
    std::vector<std::vector<double>> out;
    out.reserve(items.size());
    for (const int64_t i : items) out.push_back(compute(i));
    return out;
  });
}

std::vector<std::vector<double>> RunDataParallelBatch(
    Communicator& comm, std::span<const double> costs,
    const std::function<std::vector<std::vector<double>>(std::span<const int64_t> items)>& compute) {
  const std::vector<int> owner = AssignItems(costs, comm.size());
  const int64_t n_items = static_cast<int64_t>(costs.size());
  std::vector<int64_t> my_items;
  for (int64_t i = 0; i < n_items; ++i) {
    if (owner[static_cast<size_t>(i)] == comm.rank()) my_items.push_back(i);
  }
  std::vector<std::vector<double>> computed = compute(my_items);
  if (computed.size() != my_items.size()) {
    throw ShapeError(fmt::format("rank {}: computed {} results for its {} items", comm.rank(), computed.size(),
                                 my_items.size()));
  }
  // This rank's results, serialised: per item, its index, its length, its values (native byte order: every
  // rank runs the same build).
  std::vector<std::byte> mine;
  std::vector<std::vector<double>> results(comm.rank() == 0 ? static_cast<size_t>(n_items) : 0);
  for (size_t k = 0; k < my_items.size(); ++k) {
    const int64_t i = my_items[k];
    std::vector<double>& r = computed[k];
    if (comm.rank() == 0) {
      results[static_cast<size_t>(i)] = std::move(r);
      continue;
    }
    const int64_t n = static_cast<int64_t>(r.size());
    Append(mine, &i, sizeof i);
    Append(mine, &n, sizeof n);
    Append(mine, r.data(), r.size() * sizeof(double));
  }
  const std::vector<std::vector<std::byte>> all = comm.Gather(mine, 0);
  if (comm.rank() != 0) return {};
  std::vector<char> received(static_cast<size_t>(n_items), 0);
  for (int64_t i = 0; i < n_items; ++i) received[static_cast<size_t>(i)] = owner[static_cast<size_t>(i)] == 0;
  for (int from = 1; from < comm.size(); ++from) {
    const std::vector<std::byte>& in = all[static_cast<size_t>(from)];
    size_t offset = 0;
    while (offset < in.size()) {
      int64_t i = 0, n = 0;
      Read(in, offset, &i, sizeof i, from);
      Read(in, offset, &n, sizeof n, from);
      if (i < 0 || i >= n_items || owner[static_cast<size_t>(i)] != from || received[static_cast<size_t>(i)] || n < 0 ||
          static_cast<uint64_t>(n) > (in.size() - offset) / sizeof(double)) {
        throw DistError(fmt::format("rank 0: rank {} sent a result for item {} of length {} that it does not own, "
                                    "sent twice, or that overruns its message", from, i, n));
      }
      std::vector<double>& r = results[static_cast<size_t>(i)];
      r.resize(static_cast<size_t>(n));
      Read(in, offset, r.data(), r.size() * sizeof(double), from);
      received[static_cast<size_t>(i)] = 1;
    }
  }
  for (int64_t i = 0; i < n_items; ++i) {
    if (!received[static_cast<size_t>(i)]) {
      throw DistError(fmt::format("rank 0: no result for item {} from its owner, rank {}", i,
                                  owner[static_cast<size_t>(i)]));
    }
  }
  return results;
}

}  // namespace posenc
