#include "posenc/eval/windows.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

void ValidateWindows(int64_t stream_length, int64_t n_pred, std::span<const int64_t> ctxs) {
  if (n_pred <= 0) throw ConfigError(fmt::format("tokens (N) must be > 0, got {}", n_pred));
  for (int64_t ctx : ctxs) {
    if (ctx <= 0) throw ConfigError(fmt::format("ctx must be > 0, got {}", ctx));
    if (n_pred % ctx != 0) {
      throw ConfigError(fmt::format("tokens (N) = {} must be a multiple of every ctx; {} % {} = {}", n_pred, n_pred,
                                    ctx, n_pred % ctx));
    }
  }
  if (stream_length - 1 < n_pred) {  // stream_length < N + 1, without overflow
    throw ConfigError(fmt::format("the text has {} tokens; N + 1 = {} are needed (N = {} predictions)",
                                  stream_length, n_pred + 1, n_pred));
  }
}

std::vector<PositionBucket> PositionBuckets(int64_t ctx, int64_t l0) {
  if (ctx < 1) throw ConfigError(fmt::format("ctx must be >= 1, got {}", ctx));
  if (l0 < 2) throw ConfigError(fmt::format("training length L0 must be >= 2, got {}", l0));
  std::vector<int64_t> edges = {0, l0 / 2, l0};
  while (edges.back() < ctx) edges.push_back(edges.back() * 2);
  std::vector<PositionBucket> out;
  for (size_t i = 0; i + 1 < edges.size(); ++i) {
    if (edges[i + 1] <= ctx) out.push_back({edges[i], edges[i + 1]});
  }
  return out;
}

}  // namespace posenc
