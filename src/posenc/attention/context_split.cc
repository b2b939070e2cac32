#include "posenc/attention/context_split.h"

#include <algorithm>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

// Chunk c of n_chunks over [0, n): the first n % n_chunks chunks hold one position more.
PositionRange Chunk(int64_t n, int64_t n_chunks, int64_t c) {
  const int64_t base = n / n_chunks, extra = n % n_chunks;
  const int64_t begin = c * base + std::min(c, extra);
  return {begin, begin + base + (c < extra ? 1 : 0)};
}

}  // namespace

std::string_view ContextSplitName(ContextSplitKind kind) {
  return kind == ContextSplitKind::kZigzag ? "zigzag" : "contiguous";
}

ContextSplitKind ParseContextSplit(std::string_view name) {
  if (name == "zigzag") return ContextSplitKind::kZigzag;
  if (name == "contiguous") return ContextSplitKind::kContiguous;
  throw ConfigError(fmt::format("context split must be 'zigzag' or 'contiguous', got '{}'", name));
}

int64_t ContextSplit::Count(int rank) const {
  int64_t n = 0;
  for (const PositionRange& r : ranges[static_cast<size_t>(rank)]) n += r.size();
  return n;
}

int64_t ContextSplit::MaxCount() const {
  int64_t n = 0;
  for (int r = 0; r < n_ranks(); ++r) n = std::max(n, Count(r));
  return n;
}

int64_t ContextSplit::CausalPairs(int rank) const {
  int64_t pairs = 0;
  for (const PositionRange& r : ranges[static_cast<size_t>(rank)]) {
    pairs += (r.begin + 1 + r.end) * r.size() / 2;  // sum of p + 1 for p in [begin, end)
  }
  return pairs;
}

ContextSplit MakeContextSplit(int64_t n_tokens, int n_ranks, ContextSplitKind kind) {
  if (n_ranks < 1) throw ConfigError(fmt::format("number of ranks must be >= 1, got {}", n_ranks));
  if (n_tokens < n_ranks) {
    throw RangeError(fmt::format("a window of {} tokens is shorter than the {} ranks: every rank needs at least "
                                 "one position (use a longer window or fewer ranks)",
                                 n_tokens, n_ranks));
  }
  ContextSplit s;
  s.kind = kind;
  s.n_tokens = n_tokens;
  s.ranges.resize(static_cast<size_t>(n_ranks));
  for (int r = 0; r < n_ranks; ++r) {
    std::vector<PositionRange>& mine = s.ranges[static_cast<size_t>(r)];
    if (kind == ContextSplitKind::kContiguous) {
      mine.push_back(Chunk(n_tokens, n_ranks, r));
      continue;
    }
    const int64_t n_chunks = 2 * static_cast<int64_t>(n_ranks);
    for (const int64_t c : {static_cast<int64_t>(r), n_chunks - 1 - r}) {
      const PositionRange chunk = Chunk(n_tokens, n_chunks, c);
      if (chunk.size() > 0) mine.push_back(chunk);
    }
  }
  return s;
}

}  // namespace posenc
