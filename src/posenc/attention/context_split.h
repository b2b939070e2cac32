// Which positions of a window each rank holds in context-parallel attention: contiguous blocks, or the zigzag
// assignment that balances the causal triangle.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace posenc {

/// Positions [begin, end) of a window (tokens, 0-based global positions).
struct PositionRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

/// How a window's positions are dealt to the ranks.
///   kContiguous: rank r holds the r-th of N consecutive blocks. Causal work grows
///                with r: rank r's queries see ~(2r + 1) L^2 / (2 N^2) keys, so the last rank does 2N - 1 times
///                the first's work.
///   kZigzag:     the window is cut into 2N chunks; rank r holds chunks r and 2N - 1 - r (a near one and its
///                mirror from the far end), so every rank's causal work is equal when 2N divides L
///                (TransformerEngine's context-parallel load balancing, `get_batch_on_this_cp_rank`).
enum class ContextSplitKind { kContiguous, kZigzag };

/// "contiguous" or "zigzag".
std::string_view ContextSplitName(ContextSplitKind kind);

/// Parses "contiguous" or "zigzag". Errors: ConfigError naming the value.
ContextSplitKind ParseContextSplit(std::string_view name);

/// The positions of every rank for one window of n_tokens positions.
struct ContextSplit {
  ContextSplitKind kind = ContextSplitKind::kZigzag;
  int64_t n_tokens = 0;                             // window length L
  std::vector<std::vector<PositionRange>> ranges;   // [n_ranks][segments]: ascending, disjoint, non-empty

  int n_ranks() const { return static_cast<int>(ranges.size()); }
  /// Positions held by `rank` (sum of its segment sizes). Precondition: 0 <= rank < n_ranks().
  int64_t Count(int rank) const;
  /// Most positions any rank holds (the size of the largest K/V block).
  int64_t MaxCount() const;
  /// Causal (query, key) pairs of `rank`'s queries: sum over its positions p of p + 1. Per head; multiply by
  /// n_heads * 4 * head_dim for flops.
  int64_t CausalPairs(int rank) const;
};

/// Deals positions [0, n_tokens) to n_ranks ranks. Chunk sizes differ by at most one (the first n_tokens % n_chunks
/// chunks are one longer), so splits are uneven when n_ranks (kContiguous) or 2 n_ranks (kZigzag) does not divide
/// n_tokens. Every rank gets at least one position; empty chunks (kZigzag with n_tokens < 2 n_ranks) are dropped.
///
/// Errors:  ConfigError if n_ranks < 1; RangeError if n_tokens < n_ranks ("a window of L tokens is shorter than
///          the N ranks": some rank would hold no position).
/// Source:  zigzag: NVIDIA TransformerEngine `get_batch_on_this_cp_rank` (2 * cp_size chunks, rank r takes
///          chunks r and 2 * cp_size - 1 - r); Megatron-LM context parallelism.
ContextSplit MakeContextSplit(int64_t n_tokens, int n_ranks, ContextSplitKind kind = ContextSplitKind::kZigzag);

}  // namespace posenc
