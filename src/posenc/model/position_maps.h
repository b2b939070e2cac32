// The training-free methods that map positions instead of scaling RoPE: Self-Extend, Dual Chunk Attention, ReRoPE
// and Leaky ReRoPE, attention sinks (StreamingLLM) and LM-Infinite, each defined in its own file under
// model/position_maps/.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "posenc/attention/position_map.h"

namespace posenc {

/// The user's parameters of the position-map methods (unset: the defaults below, from L0 and the context L).
struct PositionMapOptions {
  std::optional<int64_t> group;     // self-extend: group size G
  std::optional<int64_t> window;    // self-extend: neighbour window W; rerope / leaky-rerope: w; sinks: recent
                                    // keys W; lm-infinite: local window (tokens)
  std::optional<double> leak;       // leaky-rerope: k (distances past w grow 1/k per token)
  std::optional<int64_t> sinks;     // sinks: number of sink tokens s
  std::optional<int64_t> n_global;  // lm-infinite: global tokens n
  std::optional<int64_t> chunk_size;  // dca: chunk_size (chunks hold chunk_size - local_size tokens)
  std::optional<int64_t> local_size;  // dca: local_size
};

/// Self-Extend (Jin et al. 2024, "LLM Maybe LongLM", sec. 3, eq. 3-4): relative distance d = i - j < window
/// keeps plain positions (neighbour attention); farther keys are scored at grouped positions, the query at
/// floor(i / group) + window - floor(window / group) and the key at floor(j / group); the two score sets are
/// merged before the softmax. Errors: ConfigError naming the field unless group >= 1 and window >= 1.
std::unique_ptr<PositionMap> MakeSelfExtendMap(int64_t group, int64_t window);

/// Dual Chunk Attention (An et al. 2024, "Training-Free Long-Context Scaling of Large Language Models", sec. 3;
/// chunks as its ChunkLlama code and Qwen2.5-1M's dual_chunk_attention_config): positions are cut into chunks of
/// c = chunk_size - local_size tokens; every key is rotated at j mod c; the query at i is scored
///   intra-chunk (key in the query's chunk, floor(j / c) == floor(i / c)):  at i mod c (distance i - j);
///   successive-chunk (key in the chunk before):  at min(i mod c + c, chunk_size) (the distance i - j, capped so
///     that no distance passes chunk_size);
///   inter-chunk (keys in earlier chunks):  at min(2c - 1, chunk_size), one position for every query;
/// the three score sets merged before the softmax. Every distance is at most chunk_size.
/// Errors: ConfigError naming the field unless local_size >= 0, chunk_size > local_size and chunk_size <= 2^31.
std::unique_ptr<PositionMap> MakeDualChunkMap(int64_t chunk_size, int64_t local_size);

/// ReRoPE (Su 2023, "Rectified Rotary Position Embeddings"): d < window keeps the plain score; farther keys are
/// scored at relative distance exactly window (query at window, key at 0).
/// Errors: ConfigError unless window >= 1.
std::unique_ptr<PositionMap> MakeReRopeMap(int64_t window);

/// Leaky ReRoPE (Su 2023): d < window plain; farther keys at distance window + (d - window) / leak (query at
/// window + (i - window) / leak, key at j / leak). Errors: ConfigError unless window >= 1 and leak finite >= 1.
std::unique_ptr<PositionMap> MakeLeakyReRopeMap(int64_t window, double leak);

/// Attention sinks (Xiao et al. 2024, "Efficient Streaming Language Models with Attention Sinks", sec. 3.2 and
/// its perplexity evaluation): the query at i attends to keys 0..sinks-1 and its window most recent keys
/// i-window+1..i (itself included); positions are cache indices, so a recent key keeps its distance and a sink
/// key m is seen from index min(i, sinks + window - 1) (keys rotated after they are read: a pre-rotation
/// cache). Errors: ConfigError unless sinks >= 0 and window >= 1.
std::unique_ptr<PositionMap> MakeSinksMap(int64_t sinks, int64_t window);

/// LM-Infinite (Han et al. 2024, "LM-Infinite: Zero-Shot Extreme Length Generalization", sec. 4): the
/// Lambda-shaped mask, keys 0..n_global-1 and i-window+1..i; local keys at their distance, a global key farther
/// than the window at distance exactly window (query at window, key at 0).
/// Errors: ConfigError unless n_global >= 0 and window >= 1.
std::unique_ptr<PositionMap> MakeLmInfiniteMap(int64_t n_global, int64_t window);

/// The map of position-map method `name` ("self-extend", "dca", "rerope", "leaky-rerope", "sinks", "lm-infinite") for
/// windows of ctx tokens of a model trained at L0 tokens, options filled in with defaults:
///   self-extend: window = max(1, L0 / 4), group = max(1, ceil((ctx - window) / (L0 - window))) (the smallest
///     group whose extended range (L0 - window) * group + window reaches ctx);
///   dca: chunk_size = 3 L0 / 4, local_size = L0 / 16 (ChunkLlama's defaults; a model file's
///     dual_chunk_attention_config is passed in as options by BuildMethodRope);
///   rerope: window = max(1, L0 / 2);  leaky-rerope: the same window, leak = max(1, (ctx - window) /
///     (L0 - window)) (the farthest key lands at distance < L0);
///   sinks: sinks = 4, window = L0 - sinks (a cache of L0 entries, StreamingLLM's setting);
///   lm-infinite: n_global = 10, window = L0 (LM-Infinite's n_global and L_pretrain).
/// Parameters a method does not read are ignored by it.
/// Errors: ConfigError for an unknown name, L0 < 2, ctx < 1, or a parameter out of range (as the Make
///   functions; a default window that leaves no room, e.g. sinks >= L0, names the parameter to set).
std::unique_ptr<PositionMap> MakePositionMap(const std::string& name, const PositionMapOptions& options, int64_t ctx,
                                             int64_t L0);

}  // namespace posenc
