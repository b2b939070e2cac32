#include "posenc/rope/position_ids.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

void CheckMask(const std::vector<int64_t>& mask, int64_t batch, int64_t seq) {
  if (batch < 0 || seq < 0 || static_cast<int64_t>(mask.size()) != batch * seq) {
    throw ShapeError(fmt::format("attention_mask must have batch * seq = {} * {} entries, got {}", batch, seq,
                                 mask.size()));
  }
  for (size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] != 0 && mask[i] != 1) {
      throw ConfigError(fmt::format("attention_mask[{}] must be 0 or 1, got {}", i, mask[i]));
    }
  }
}

}  // namespace

std::vector<int64_t> PositionIdsFromAttentionMask(const std::vector<int64_t>& mask, int64_t batch, int64_t seq) {
  CheckMask(mask, batch, seq);
  std::vector<int64_t> out(mask.size());
  for (int64_t b = 0; b < batch; ++b) {
    int64_t count = 0;
    for (int64_t s = 0; s < seq; ++s) {
      const size_t i = static_cast<size_t>(b * seq + s);
      count += mask[i];
      out[i] = mask[i] ? count - 1 : 1;
    }
  }
  return out;
}

std::vector<int64_t> NextDecodePositions(const std::vector<int64_t>& mask, int64_t batch, int64_t seq) {
  CheckMask(mask, batch, seq);
  std::vector<int64_t> out(static_cast<size_t>(batch), 0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) out[static_cast<size_t>(b)] += mask[static_cast<size_t>(b * seq + s)];
  }
  return out;
}

std::vector<int64_t> PositionIdsForPackedDocuments(const std::vector<int64_t>& doc_lens) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < doc_lens.size(); ++d) {
    if (doc_lens[d] < 1) throw ConfigError(fmt::format("doc_lens[{}] must be >= 1, got {}", d, doc_lens[d]));
    for (int64_t t = 0; t < doc_lens[d]; ++t) out.push_back(t);
  }
  return out;
}

std::vector<int64_t> PositionRange(int64_t offset, int64_t n) {
  if (offset < 0) throw RangeError(fmt::format("position offset must be >= 0, got {}", offset));
  if (n < 0) throw RangeError(fmt::format("number of positions must be >= 0, got {}", n));
  std::vector<int64_t> out(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) out[static_cast<size_t>(t)] = offset + t;
  return out;
}

}  // namespace posenc
