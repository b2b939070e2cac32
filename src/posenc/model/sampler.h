// llama2.c token sampling: greedy, or temperature + top-p with its xorshift RNG (run.c `Sampler`).
#pragma once

#include <cstdint>
#include <vector>

namespace posenc {

/// llama2.c's xorshift64* generator (run.c `random_u32` / `random_f32`).
class XorShiftRng {
 public:
  explicit XorShiftRng(uint64_t seed) : state_(seed) {}
  /// state ^= state >> 12; state ^= state << 25; state ^= state >> 27; (state * 0x2545F4914F6CDD1D) >> 32.
  uint32_t NextU32();
  /// (NextU32() >> 8) / 16777216.0f: uniform in [0, 1) with 24 random bits.
  float NextF32();
  uint64_t state() const { return state_; }

 private:
  uint64_t state_;
};

/// Samples the next token from logits as llama2.c run.c `sample` does.
class Sampler {
 public:
  /// temperature 0 = greedy (argmax, first maximum); otherwise softmax(logits / temperature) then top-p
  /// (nucleus) sampling when 0 < topp < 1, plain multinomial sampling otherwise; one RNG draw per sampled
  /// token (none when greedy).
  /// Errors: ConfigError if temperature is negative or not finite, topp is outside [0, 1] or NaN
  ///         ("temperature must be >= 0, got -1"), or seed is 0 (xorshift's fixed point; Generate turns a
  ///         requested seed 0 into a clock seed, as llama2.c does).
  Sampler(float temperature, float topp, uint64_t seed);

  /// Chooses a token id in [0, logits.size()). logits is modified (scaled and turned into probabilities), as
  /// in llama2.c, with two limits made explicit:
  ///   - a temperature so small that logits / temperature overflows float32 gives the greedy choice (the
  ///     T -> 0 limit of the softmax), never NaN probabilities;
  ///   - the top-p nucleus keeps at least the most probable token (when topp < 1/n every probability can
  ///     fall below llama2.c's cutoff (1 - topp) / (n - 1); llama2.c then indexes its candidate list at -1).
  /// Errors: ShapeError if logits is empty; NumericError naming the index if a logit is NaN or infinite.
  /// Source: llama2.c run.c `sample`, `sample_argmax`, `sample_mult`, `sample_topp` (ties in the top-p sort
  /// keep index order: a stable sort, as the numpy oracle's `sample_next`); HF `TopPLogitsWarper`
  /// (min_tokens_to_keep = 1).
  int Sample(std::vector<float>& logits);

 private:
  float temperature_;
  float topp_;
  XorShiftRng rng_;
  std::vector<int> order_;  // scratch for top-p: candidate ids
};

}  // namespace posenc
