#include "posenc/eval/kl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/io/output_file.h"

namespace posenc {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'N', 'C', 'L', 'O', 'G', 'P'};

// log_softmax of a row in double (max-subtracted).
void LogSoftmax(const float* logits, int64_t vocab, std::vector<double>& out) {
  out.resize(static_cast<size_t>(vocab));
  double mx = logits[0];
  for (int64_t v = 1; v < vocab; ++v) mx = std::max(mx, static_cast<double>(logits[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(logits[v]) - mx);
  const double lse = mx + std::log(sum);
  for (int64_t v = 0; v < vocab; ++v) out[static_cast<size_t>(v)] = static_cast<double>(logits[v]) - lse;
}

template <typename T>
void Put(std::string& s, T v) {
  s.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

}  // namespace

BaseLogProbs MakeBaseLogProbs(const ProtocolPlan& plan, int64_t vocab) {
  RequireMemory(SaturatingMul(SaturatingMul(plan.n_scored, vocab), 4),
                fmt::format("the KL base at ctx {}", plan.ctx),
                fmt::format("the base's log-probabilities of {} predictions x {} tokens", plan.n_scored, vocab));
  BaseLogProbs b;
  b.ctx = plan.ctx;
  b.vocab = vocab;
  for (const ProtocolWindow& w : plan.windows) b.targets.insert(b.targets.end(), w.targets.begin(), w.targets.end());
  b.logp.resize(static_cast<size_t>(plan.n_scored * vocab));
  return b;
}

void StoreBaseRow(BaseLogProbs& base, int64_t k, const float* logits) {
  thread_local std::vector<double> lp;
  LogSoftmax(logits, base.vocab, lp);
  float* out = base.logp.data() + k * base.vocab;
  for (int64_t v = 0; v < base.vocab; ++v) out[v] = static_cast<float>(lp[static_cast<size_t>(v)]);
}

KlAccumulator::KlAccumulator(const ProtocolPlan& plan, const BaseLogProbs& base) : base_(base) {
  for (const ProtocolWindow& w : plan.windows) {
    for (size_t j = 0; j < w.targets.size(); ++j) position_.push_back(w.score_from + static_cast<int64_t>(j));
  }
  std::vector<int> targets;
  for (const ProtocolWindow& w : plan.windows) targets.insert(targets.end(), w.targets.begin(), w.targets.end());
  if (base.ctx != plan.ctx || targets != base.targets) {
    throw ShapeError(fmt::format("KL base: its block for ctx {} holds {} predictions, this run scores {} at ctx {}{}",
                                 base.ctx, base.targets.size(), targets.size(), plan.ctx,
                                 base.targets.size() == targets.size() ? " (other tokens)" : ""));
  }
  kl_.assign(position_.size(), 0.0);
  dp_.assign(position_.size(), 0.0);
  top1_.assign(position_.size(), 0);
}

void KlAccumulator::Add(int64_t k, const float* logits) {
  thread_local std::vector<double> lp;
  const int64_t vocab = base_.vocab;
  LogSoftmax(logits, vocab, lp);
  const float* b = base_.logp.data() + k * vocab;
  double kl = 0.0;
  int64_t arg_b = 0, arg_m = 0;
  for (int64_t v = 0; v < vocab; ++v) {
    const double lb = b[v];
    kl += std::exp(lb) * (lb - lp[static_cast<size_t>(v)]);
    if (b[v] > b[arg_b]) arg_b = v;
    if (lp[static_cast<size_t>(v)] > lp[static_cast<size_t>(arg_m)]) arg_m = v;
  }
  const int target = base_.targets[static_cast<size_t>(k)];
  kl_[static_cast<size_t>(k)] = kl;
  dp_[static_cast<size_t>(k)] = std::exp(lp[static_cast<size_t>(target)]) - std::exp(static_cast<double>(b[target]));
  top1_[static_cast<size_t>(k)] = arg_b == arg_m ? 1 : 0;
}

KlStats KlAccumulator::Summarize(const std::vector<int64_t>& rows) const {
  KlStats s;
  s.count = static_cast<int64_t>(rows.size());
  if (rows.empty()) throw ConfigError("KL: no scored prediction");
  std::vector<double> kl;
  kl.reserve(rows.size());
  double top1 = 0.0;
  for (int64_t k : rows) {
    s.kl_mean += kl_[static_cast<size_t>(k)];
    s.dp_mean += dp_[static_cast<size_t>(k)];
    top1 += top1_[static_cast<size_t>(k)];
    kl.push_back(kl_[static_cast<size_t>(k)]);
  }
  const double n = static_cast<double>(rows.size());
  s.kl_mean /= n;
  s.dp_mean /= n;
  s.top1_agree = top1 / n;
  std::sort(kl.begin(), kl.end());
  const double pos = 0.99 * (n - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, kl.size() - 1);
  s.kl_p99 = kl[lo] + (pos - static_cast<double>(lo)) * (kl[hi] - kl[lo]);
  return s;
}

KlStats KlAccumulator::Total() const {
  std::vector<int64_t> rows(kl_.size());
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return Summarize(rows);
}

std::vector<std::pair<PositionBucket, KlStats>> KlAccumulator::Buckets(int64_t l0) const {
  std::vector<std::pair<PositionBucket, KlStats>> out;
  for (const PositionBucket& b : PositionBuckets(base_.ctx, l0)) {
    std::vector<int64_t> rows;
    for (size_t k = 0; k < position_.size(); ++k) {
      if (position_[k] >= b.from && position_[k] < b.to) rows.push_back(static_cast<int64_t>(k));
    }
    if (!rows.empty()) out.emplace_back(b, Summarize(rows));
  }
  return out;
}

void SaveBaseLogProbs(const std::string& path, const std::vector<BaseLogProbs>& blocks) {
  std::string s(kMagic, sizeof(kMagic));
  Put<uint32_t>(s, 1);
  Put<uint32_t>(s, static_cast<uint32_t>(blocks.size()));
  for (const BaseLogProbs& b : blocks) {
    Put<int64_t>(s, b.ctx);
    Put<int64_t>(s, static_cast<int64_t>(b.targets.size()));
    Put<int64_t>(s, b.vocab);
    s.append(reinterpret_cast<const char*>(b.targets.data()), b.targets.size() * sizeof(int));
    s.append(reinterpret_cast<const char*>(b.logp.data()), b.logp.size() * sizeof(float));
  }
  WriteFileAtomically(path, s);
}

std::vector<BaseLogProbs> LoadBaseLogProbs(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw IoError(fmt::format("`kl_base_file` {}: not a readable file of base log-probabilities "
                              "(`save_logits` writes them)", path));
  }
  auto get = [&](void* p, size_t n, const char* what) {
    if (!in.read(static_cast<char*>(p), static_cast<std::streamsize>(n))) {
      throw IoError(fmt::format("`kl_base_file` {}: truncated in {}", path, what));
    }
  };
  char magic[8];
  get(magic, 8, "the magic");
  if (std::memcmp(magic, kMagic, 8) != 0) {
    throw IoError(fmt::format("`kl_base_file` {}: not a file of base log-probabilities (`save_logits` writes them)",
                              path));
  }
  uint32_t version = 0, n = 0;
  get(&version, 4, "the version");
  if (version != 1) throw IoError(fmt::format("`kl_base_file` {}: version {} (this build reads 1)", path, version));
  get(&n, 4, "the block count");
  std::vector<BaseLogProbs> blocks(n);
  for (BaseLogProbs& b : blocks) {
    int64_t count = 0;
    get(&b.ctx, 8, "a block header");
    get(&count, 8, "a block header");
    get(&b.vocab, 8, "a block header");
    if (count < 0 || b.vocab < 1 || count > (int64_t{1} << 40) / b.vocab) {
      throw IoError(fmt::format("`kl_base_file` {}: block of ctx {}: {} predictions x vocab {} is not a size", path,
                                b.ctx, count, b.vocab));
    }
    b.targets.resize(static_cast<size_t>(count));
    get(b.targets.data(), b.targets.size() * sizeof(int), "the targets");
    b.logp.resize(static_cast<size_t>(count * b.vocab));
    get(b.logp.data(), b.logp.size() * sizeof(float), "the log-probabilities");
  }
  return blocks;
}

}  // namespace posenc
