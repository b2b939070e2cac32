// The eval forward's mean next-token NLL of one window, for tests that check a training checkpoint reads back
// as trained (the eval forward's NLL equals the training loss).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/eval/perplexity.h"
#include "posenc/model/methods.h"
#include "posenc/model/transformer.h"

namespace posenc::testing {

/// Mean over t of -log softmax(logits_t)[targets[t]] for `inputs` at `positions` under the file's own RoPE
/// (method native); logits of the last call are left in `logits` [n, vocab_size].
inline double EvalMeanNll(const Transformer& model, std::span<const int32_t> inputs, std::span<const int32_t> targets,
                          std::span<const int64_t> positions, std::vector<float>& logits) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  const int64_t vocab = model.config().vocab_size;
  const MethodRope rope = BuildMethodRope(RopeMethod::kNative, n, model.config());
  const std::vector<int> tokens(inputs.begin(), inputs.end());
  ForwardState state;
  logits.assign(static_cast<size_t>(n * vocab), 0.0f);
  model.Forward(tokens, positions, rope.forward(), state, logits.data());
  double nll = 0;
  for (int64_t t = 0; t < n; ++t) nll += TokenNll(logits.data() + t * vocab, vocab, targets[static_cast<size_t>(t)]);
  return nll / static_cast<double>(n);
}

}  // namespace posenc::testing
