#include "posenc/model/sampler.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/kernels/finite_kernels.h"

namespace posenc {

uint32_t XorShiftRng::NextU32() {
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
}

float XorShiftRng::NextF32() { return static_cast<float>(NextU32() >> 8) / 16777216.0f; }

Sampler::Sampler(float temperature, float topp, uint64_t seed) : temperature_(temperature), topp_(topp), rng_(seed) {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    throw ConfigError(fmt::format("temperature must be >= 0 and finite, got {}", temperature));
  }
  if (!(topp >= 0.0f && topp <= 1.0f)) throw ConfigError(fmt::format("topp must be in [0, 1], got {}", topp));
  if (seed == 0) {
    throw ConfigError("seed must not be 0: xorshift's state 0 maps to 0 forever, so every draw would be 0");
  }
}

int Sampler::Sample(std::vector<float>& logits) {
  const int n = static_cast<int>(logits.size());
  if (n == 0) throw ShapeError("Sampler::Sample: logits are empty");
  if (const int64_t bad = kernels::FirstNonFinite(logits.data(), n); bad >= 0) {
    throw NumericError(fmt::format("logits[{}] is {}: no token can be sampled", bad, logits[bad]));
  }
  if (n == 1) return 0;
  int best = 0;  // the greedy choice: first maximum
  for (int i = 1; i < n; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  if (temperature_ == 0.0f) return best;
  // softmax(logits / temperature), llama2.c `softmax`: max subtracted, expf, sequential float sum.
  for (float& x : logits) x /= temperature_;
  const float m = *std::max_element(logits.begin(), logits.end());
  // A temperature so small that logits / temperature overflows (m = +-inf) is the greedy limit T -> 0:
  // softmax puts all mass on the maximum. (inf - inf would make every probability NaN.)
  if (!std::isfinite(m)) return best;
  float sum = 0.0f;
  for (float& x : logits) {
    x = std::exp(x - m);
    sum += x;
  }
  for (float& x : logits) x /= sum;
  const float coin = rng_.NextF32();
  const std::vector<float>& p = logits;
  if (topp_ <= 0.0f || topp_ >= 1.0f) {  // sample_mult
    float cdf = 0.0f;
    for (int i = 0; i < n; ++i) {
      cdf += p[i];
      if (coin < cdf) return i;
    }
    return n - 1;
  }
  // sample_topp: candidates with p >= (1 - topp) / (n - 1), by probability descending.
  const float cutoff = (1.0f - topp_) / static_cast<float>(n - 1);
  order_.clear();
  for (int i = 0; i < n; ++i) {
    if (p[i] >= cutoff) order_.push_back(i);
  }
  // The nucleus always keeps the most probable token (HF TopPLogitsWarper min_tokens_to_keep = 1): with
  // topp < 1/n every probability can fall below the cutoff, and llama2.c would then read order_[-1].
  if (order_.empty()) return best;
  std::stable_sort(order_.begin(), order_.end(), [&](int a, int b) { return p[a] > p[b]; });
  float cumulative = 0.0f;
  size_t last = order_.size() - 1;
  for (size_t i = 0; i < order_.size(); ++i) {
    cumulative += p[order_[i]];
    if (cumulative > topp_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  for (size_t i = 0; i <= last; ++i) {
    cdf += p[order_[i]];
    if (r < cdf) return order_[i];
  }
  return order_[last];
}

}  // namespace posenc
