// Shared pieces of `posenc demo`: the topic list, a portable seeded generator, runs of pair regimes and
// the float32 rounding constants the demos quote in their error bounds.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "posenc/rope/frequencies.h"

namespace posenc::demo {

/// The topics of `posenc demo`, in the order `posenc demo` (no topic) runs them.
enum class DemoTopic { kPositionBlind, kSinusoidal, kLearned, kRope, kExtension, kCompare, kFinetune };

/// "position-blind", "sinusoidal", "learned", "rope", "extension", "compare" or "finetune".
std::string_view DemoTopicName(DemoTopic topic);

/// Parses a topic name as DemoTopicName spells it.
/// Errors: posenc::ConfigError "demo topic must be one of position-blind, sinusoidal, ..., got 'x'".
DemoTopic ParseDemoTopic(std::string_view name);

/// Every topic, in running order.
std::vector<DemoTopic> AllDemoTopics();

/// How a topic names the model it ran: the last component of its path ("data/stories260K.bin" ->
/// "stories260K.bin", "models/qwen/" -> "qwen"); the path itself when it has none. Errors: none.
std::string ModelName(const std::string& path);

/// Checks the training length L0 a topic derives its contexts from.
/// Errors: ConfigError "demo <topic>: the model's training length L0 must be in [1, 2^40], got N".
void CheckDemoTrainCtx(DemoTopic topic, int64_t train_ctx);

/// float32 unit roundoff u = 2^-24: one rounding of a float32 result is off by at most u relative.
inline constexpr double kF32Roundoff = 0x1p-24;

/// A seeded generator whose draws are the same on every platform: std::mt19937_64 (its sequence is fixed
/// by the C++ standard) with hand-written uniform mappings (std::uniform_*_distribution are not portable).
class DemoRng {
 public:
  explicit DemoRng(uint64_t seed) : engine_(seed) {}
  /// An integer in [lo, hi] (inclusive; hi - lo < 2^63). Modulo mapping: its bias (< 2^-40 for ranges
  /// under 2^24) does not matter for a demo.
  int64_t Int(int64_t lo, int64_t hi) {
    const uint64_t range = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(engine_() % range);
  }
  /// A float32 in [-1, 1): (top 24 bits) * 2^-23 - 1, exact in float32.
  float Symmetric() { return static_cast<float>(static_cast<double>(engine_() >> 40) * 0x1p-23 - 1.0); }

 private:
  std::mt19937_64 engine_;
};

/// A maximal run of consecutive pairs [first, last] that share one regime.
struct RegimeRun {
  PairRegime regime = PairRegime::kKept;
  int64_t first = 0;  // pair index, inclusive
  int64_t last = 0;   // pair index, inclusive
};

/// Splits a per-pair regime list into runs, in pair order. Shapes: regimes [half]; returns one run per
/// change of regime (empty for an empty list).
std::vector<RegimeRun> RegimeRuns(const std::vector<PairRegime>& regimes);

}  // namespace posenc::demo
