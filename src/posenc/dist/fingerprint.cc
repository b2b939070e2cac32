#include "posenc/dist/fingerprint.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

constexpr uint64_t kFnvOffset = 14695981039346656037ull;  // FNV-1a 64-bit offset basis
constexpr uint64_t kFnvPrime = 1099511628211ull;          // FNV-1a 64-bit prime

uint64_t FnvBytes(uint64_t h, const std::byte* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint64_t>(p[i])) * kFnvPrime;
  return h;
}

uint64_t LoadLittleEndian(const std::byte* p) {
  uint64_t w = 0;
  for (int i = 7; i >= 0; --i) w = (w << 8) | static_cast<uint64_t>(p[i]);
  return w;
}

}  // namespace

Fingerprint::Fingerprint() { lanes_.fill(kFnvOffset); }

void Fingerprint::Word(uint64_t w) {
  uint64_t& h = lanes_[n_words_++ % 4];
  h = (h ^ w) * kFnvPrime;
}

Fingerprint& Fingerprint::Add(std::span<const std::byte> bytes) {
  length_ += bytes.size();
  size_t i = 0;
  if (n_pending_ > 0) {  // complete the pending round first
    const size_t take = std::min(bytes.size(), pending_.size() - n_pending_);
    std::memcpy(pending_.data() + n_pending_, bytes.data(), take);
    n_pending_ += take;
    i = take;
    if (n_pending_ < pending_.size()) return *this;
    for (size_t w = 0; w < 4; ++w) Word(LoadLittleEndian(pending_.data() + 8 * w));
    n_pending_ = 0;
  }
  for (; i + 32 <= bytes.size(); i += 32) {
    for (size_t w = 0; w < 4; ++w) Word(LoadLittleEndian(bytes.data() + i + 8 * w));
  }
  std::memcpy(pending_.data(), bytes.data() + i, bytes.size() - i);
  n_pending_ = bytes.size() - i;
  return *this;
}

Fingerprint& Fingerprint::Add(std::string_view text) {
  Add(static_cast<int64_t>(text.size()));
  return Add(std::as_bytes(std::span<const char>(text.data(), text.size())));
}

Fingerprint& Fingerprint::Add(int64_t value) {
  std::array<std::byte, 8> b;
  for (int i = 0; i < 8; ++i) b[static_cast<size_t>(i)] = static_cast<std::byte>((static_cast<uint64_t>(value) >> (8 * i)) & 0xff);
  return Add(std::span<const std::byte>(b));
}

uint64_t Fingerprint::value() const {
  uint64_t h = kFnvOffset;
  for (const uint64_t lane : lanes_) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((lane >> (8 * i)) & 0xff)) * kFnvPrime;
  }
  h = FnvBytes(h, pending_.data(), n_pending_);
  for (int i = 0; i < 8; ++i) h = (h ^ ((length_ >> (8 * i)) & 0xff)) * kFnvPrime;
  return h;
}

std::string FingerprintHex(std::string_view bytes) {
  Fingerprint f;
  f.Add(std::as_bytes(std::span<const char>(bytes.data(), bytes.size())));
  return fmt::format("{:#018x}", f.value());
}

uint64_t FingerprintFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("cannot read '{}': {}", path, std::strerror(errno)));
  if (!S_ISREG(st.st_mode)) throw IoError(fmt::format("'{}' is not a regular file", path));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open '{}'", path));
  Fingerprint f;
  f.Add(static_cast<int64_t>(st.st_size));
  std::vector<char> buf(size_t{1} << 20);
  int64_t total = 0;
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    f.Add(std::as_bytes(std::span<const char>(buf.data(), static_cast<size_t>(got))));
    total += got;
  }
  if (in.bad() || total != static_cast<int64_t>(st.st_size)) {
    throw IoError(fmt::format("reading '{}' failed after {} of {} bytes", path, total, st.st_size));
  }
  return f.value();
}

void CheckSameOnAllRanks(Communicator& comm, uint64_t fingerprint, std::string_view what) {
  const std::vector<uint64_t> all = comm.AllGather(fingerprint);
  std::map<uint64_t, std::vector<int>> ranks_of;
  for (size_t r = 0; r < all.size(); ++r) ranks_of[all[r]].push_back(static_cast<int>(r));
  if (ranks_of.size() == 1) return;
  std::string groups;
  // In order of each value's first rank, so rank 0's value comes first.
  std::vector<std::pair<int, uint64_t>> order;
  for (const auto& [v, ranks] : ranks_of) order.emplace_back(ranks.front(), v);
  std::sort(order.begin(), order.end());
  for (const auto& [first, v] : order) {
    const std::vector<int>& ranks = ranks_of[v];
    groups += fmt::format("{}{:#018x} on rank{} {}", groups.empty() ? "" : "; ", v, ranks.size() > 1 ? "s" : "",
                          fmt::join(ranks, ", "));
  }
  throw DistError(fmt::format("rank {}: ranks disagree on {}: {} (start every rank with the same options and files)",
                              comm.rank(), what, groups));
}

}  // namespace posenc
