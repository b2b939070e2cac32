// Classifier + cross-entropy loss: see classifier_loss.h.
#include "posenc/model/layers/classifier_loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/kernels/log_sum_exp_kernels.h"
#include "posenc/kernels/train_kernels.h"
#include "posenc/model/layers/linear.h"
#include "posenc/model/layers/parallel.h"

namespace posenc {
namespace {

constexpr int64_t kMinRows = 64;

// Checks the call; returns the number of rows with a target.
int64_t CountTargets(const char* name, std::span<const int32_t> targets, int64_t dim, int64_t vocab_size,
                     const void* x, const void* w, const void* logits, const void* lse) {
  if (dim < 1 || vocab_size < 1) {
    throw ShapeError(fmt::format("{}: dim and vocab_size must be >= 1, got {} and {}", name, dim, vocab_size));
  }
  int64_t count = 0;
  for (size_t r = 0; r < targets.size(); ++r) {
    const int32_t t = targets[r];
    if (t == kIgnoreTarget) continue;
    if (t < 0 || t >= vocab_size) {
      throw RangeError(fmt::format("{}: target at index {} must be in [0, vocab_size={}) or -1 (ignored), got {}",
                                   name, r, vocab_size, t));
    }
    ++count;
  }
  if (count == 0) {
    throw RangeError(fmt::format("{}: none of the {} targets is a token id (all -1): the mean loss over no rows is "
                                 "undefined", name, targets.size()));
  }
  if (x == nullptr || w == nullptr || logits == nullptr || lse == nullptr) {
    throw ShapeError(fmt::format("{}: null input or output pointer", name));
  }
  return count;
}

}  // namespace

template <typename T>
double ClassifierLossForward(const T* x, const T* w, std::span<const int32_t> targets, int64_t dim,
                             int64_t vocab_size, T* logits, T* lse) {
  // x [n, dim], w [vocab_size, dim] -> logits [n, vocab_size], lse [n]
  const int64_t n = static_cast<int64_t>(targets.size());
  CountTargets("ClassifierLossForward", targets, dim, vocab_size, x, w, logits, lse);
  LinearForward<T>(x, w, nullptr, n, dim, vocab_size, logits);
  std::vector<double> row_loss(static_cast<size_t>(n), 0.0);
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const T* l = logits + r * vocab_size;
      double lse_r;
      if constexpr (std::is_same_v<T, float>) {
        lse_r = kernels::LogSumExp(l, vocab_size);
      } else {
        T m = l[0];
        for (int64_t v = 1; v < vocab_size; ++v) m = std::max(m, l[v]);
        double sum = 0.0;
        for (int64_t v = 0; v < vocab_size; ++v) sum += std::exp(l[v] - m);
        lse_r = m + std::log(sum);
      }
      lse[r] = static_cast<T>(lse_r);
      const int32_t t = targets[static_cast<size_t>(r)];
      if (t != kIgnoreTarget) row_loss[static_cast<size_t>(r)] = lse_r - static_cast<double>(l[t]);
    }
  });
  double total = 0.0;
  int64_t count = 0;
  for (int64_t r = 0; r < n; ++r) {
    if (targets[static_cast<size_t>(r)] == kIgnoreTarget) continue;
    total += row_loss[static_cast<size_t>(r)];
    ++count;
  }
  return total / static_cast<double>(count);
}

template <typename T>
void ClassifierLossBackward(const T* x, const T* w, std::span<const int32_t> targets, int64_t dim,
                            int64_t vocab_size, const T* lse, double dloss, T* logits, T* dx, T* dw) {
  // x [n, dim], w [vocab_size, dim], lse [n], logits [n, vocab_size] -> dlogits (in place); dx, dw +=
  const int64_t n = static_cast<int64_t>(targets.size());
  const int64_t count = CountTargets("ClassifierLossBackward", targets, dim, vocab_size, x, w, logits, lse);
  if (!std::isfinite(dloss)) throw ConfigError(fmt::format("ClassifierLossBackward: dloss must be finite, got {}", dloss));
  if (dx == nullptr || dw == nullptr) throw ShapeError("ClassifierLossBackward: null dx or dw");
  const T scale = static_cast<T>(dloss / static_cast<double>(count));
  layers::ForEachPiece(n, kMinRows, [&](int64_t, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* l = logits + r * vocab_size;
      const int32_t t = targets[static_cast<size_t>(r)];
      if (t == kIgnoreTarget) {
        std::fill(l, l + vocab_size, T{0});
        continue;
      }
      if constexpr (std::is_same_v<T, float>) {
        kernels::SoftmaxScaleRow(l, vocab_size, lse[r], scale);
      } else {
        for (int64_t v = 0; v < vocab_size; ++v) l[v] = std::exp(l[v] - lse[r]) * scale;
      }
      l[t] -= scale;
    }
  });
  LinearBackward<T>(logits, x, w, n, dim, vocab_size, dx, dw, nullptr);
}

template double ClassifierLossForward<float>(const float*, const float*, std::span<const int32_t>, int64_t, int64_t,
                                             float*, float*);
template double ClassifierLossForward<double>(const double*, const double*, std::span<const int32_t>, int64_t,
                                              int64_t, double*, double*);
template void ClassifierLossBackward<float>(const float*, const float*, std::span<const int32_t>, int64_t, int64_t,
                                            const float*, double, float*, float*, float*);
template void ClassifierLossBackward<double>(const double*, const double*, std::span<const int32_t>, int64_t,
                                             int64_t, const double*, double, double*, double*, double*);

}  // namespace posenc
