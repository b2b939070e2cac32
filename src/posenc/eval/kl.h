// KL divergence of a method's next-token distributions from a base run's on the same scored predictions
// (llama.cpp's --kl-divergence / --kl-divergence-base): how far a method moves the model, e.g. the short-context
// cost of a static scaling factor.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/eval/protocols.h"
#include "posenc/eval/windows.h"

namespace posenc {

/// The base run's log-probabilities of every scored prediction of one plan: [n_scored, vocab] float32, row k =
/// the k-th scored prediction in plan order (window by window, targets in order).
struct BaseLogProbs {
  int64_t ctx = 0;
  int64_t vocab = 0;
  std::vector<int> targets;  // [n_scored]: the plan's targets, to check a saved file belongs to this plan
  std::vector<float> logp;   // [n_scored * vocab]
};

/// An empty base for `plan` (rows to be filled by StoreBaseRow). Errors: ConfigError (RequireMemory) if
/// n_scored * vocab floats do not fit in memory, naming --kl-baseline.
BaseLogProbs MakeBaseLogProbs(const ProtocolPlan& plan, int64_t vocab);

/// Row k of the base: log_softmax(logits) computed in double, stored as float32. Threads may fill disjoint rows.
void StoreBaseRow(BaseLogProbs& base, int64_t k, const float* logits);

/// KL statistics over a set of scored predictions.
struct KlStats {
  int64_t count = 0;
  double kl_mean = 0.0;     // mean of KL(base || method) = sum_v p_base(v) (log p_base(v) - log p_method(v)), nats
  double kl_p99 = 0.0;      // 99th percentile of the per-token KL, linear interpolation (numpy's default)
  double top1_agree = 0.0;  // fraction of predictions whose most probable token (first on ties) is the same
  double dp_mean = 0.0;     // mean of p_method(target) - p_base(target)
};

/// Per scored prediction, filled by threads on disjoint rows, then summarised.
class KlAccumulator {
 public:
  /// Errors: ShapeError if the base is not of `plan` (ctx, count or targets differ).
  KlAccumulator(const ProtocolPlan& plan, const BaseLogProbs& base);
  /// Row k: the method's logits [vocab] against base row k (log-softmax in double).
  void Add(int64_t k, const float* logits);
  /// Over every prediction, and per PositionBuckets(ctx, l0) bucket of the scored input positions (those holding
  /// any). Errors: ConfigError if no prediction was added.
  KlStats Total() const;
  std::vector<std::pair<PositionBucket, KlStats>> Buckets(int64_t l0) const;

 private:
  KlStats Summarize(const std::vector<int64_t>& rows) const;
  const BaseLogProbs& base_;
  std::vector<int64_t> position_;  // [n_scored]: in-window input position of each prediction
  std::vector<double> kl_, dp_;
  std::vector<char> top1_;
};

/// A file of base log-probabilities for several plans (one block per ctx), as --save-logits writes and
/// --kl-baseline FILE reads: "PSNCLOGP", u32 version 1, u32 blocks; per block i64 ctx, i64 n_scored, i64 vocab,
/// i32 targets[n_scored], f32 logp[n_scored * vocab]; little-endian.
/// Errors: IoError naming the path (unreadable, truncated, bad magic or version).
void SaveBaseLogProbs(const std::string& path, const std::vector<BaseLogProbs>& blocks);
std::vector<BaseLogProbs> LoadBaseLogProbs(const std::string& path);

}  // namespace posenc
