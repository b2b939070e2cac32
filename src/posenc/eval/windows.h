// Eval protocol step 2: non-overlapping windows over the first N+1 tokens, and the position buckets.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace posenc {

/// Checks that N predictions fit the windows of every context length and the stream.
/// Window w of context L has inputs tokens[wL, wL+L) and targets tokens[wL+1, wL+L+1), w < N / L.
/// Errors: ConfigError if n_pred <= 0 ("tokens (N) must be > 0, got ..."), a ctx is <= 0, or n_pred is not a
///         multiple of a ctx ("tokens (N) = 1000 must be a multiple of every ctx; 1000 % 256 = 232");
///         ConfigError if stream_length < n_pred + 1 ("the text has 900 tokens; N + 1 = 16385 are needed").
void ValidateWindows(int64_t stream_length, int64_t n_pred, std::span<const int64_t> ctxs);

/// A half-open range of in-window positions [from, to), tokens.
struct PositionBucket {
  int64_t from = 0;
  int64_t to = 0;
};

/// [0, L0/2), [L0/2, L0), [L0, 2 L0), [2 L0, 4 L0), ... keeping only the buckets inside [0, ctx).
/// Errors: ConfigError if ctx < 1 or l0 < 2. Source: ref_llama2c.py `buckets_for`.
std::vector<PositionBucket> PositionBuckets(int64_t ctx, int64_t l0);

}  // namespace posenc
