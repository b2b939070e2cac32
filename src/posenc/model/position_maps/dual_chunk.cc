// Dual Chunk Attention: An et al. 2024, "Training-Free Long-Context Scaling of Large Language Models" (ChunkLlama),
// sec. 3, with chunks of chunk_size - local_size tokens as its released code and Qwen2.5-1M's
// dual_chunk_attention_config use them.
#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/position_maps.h"

namespace posenc {
namespace {

class DualChunk final : public PositionMap {
 public:
  DualChunk(int64_t chunk_size, int64_t local_size)
      : chunk_size_(chunk_size), local_size_(local_size), chunk_len_(chunk_size - local_size) {}
  std::string_view name() const override { return "dca"; }
  std::string parameters() const override {
    return fmt::format("chunk_size {}, local_size {}", chunk_size_, local_size_);
  }
  int n_sets() const override { return 3; }
  double QueryPosition(int set, int64_t pos) const override {
    const int64_t in_chunk = pos % chunk_len_;  // positions are >= 0 (the block refuses others)
    if (set == 0) return static_cast<double>(in_chunk);                                   // intra-chunk
    if (set == 1) return static_cast<double>(std::min(in_chunk + chunk_len_, chunk_size_));  // successive
    return static_cast<double>(std::min(2 * chunk_len_ - 1, chunk_size_));                  // inter-chunk
  }
  double KeyPosition(int, int64_t pos) const override { return static_cast<double>(pos % chunk_len_); }
  int Select(int64_t query_pos, int64_t key_pos) const override {
    const int64_t qc = query_pos / chunk_len_, kc = key_pos / chunk_len_;
    return qc == kc ? 0 : (kc == qc - 1 ? 1 : 2);
  }

 private:
  int64_t chunk_size_, local_size_, chunk_len_;
};

}  // namespace

std::unique_ptr<PositionMap> MakeDualChunkMap(int64_t chunk_size, int64_t local_size) {
  if (local_size < 0) throw ConfigError(fmt::format("dca local_size must be >= 0, got {}", local_size));
  if (chunk_size > (int64_t{1} << 31)) {
    throw ConfigError(fmt::format("dca chunk_size must be at most 2^31 tokens, got {}", chunk_size));
  }
  if (chunk_size <= local_size) {
    throw ConfigError(fmt::format("dca chunk_size must exceed local_size ({}), got {}: chunks hold chunk_size - "
                                  "local_size tokens", local_size, chunk_size));
  }
  return std::make_unique<DualChunk>(chunk_size, local_size);
}

}  // namespace posenc
