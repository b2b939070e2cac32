// AdamW with decoupled weight decay, and global gradient-norm clipping, over a model's flat buffers.
//
// Master weights are the parameter buffer itself (float32 in training: there is no lower-precision copy), and
// the moments m, v have the same element type and layout. Every update is element-wise and the norm is summed
// in float64 over fixed blocks in block order, so a step gives the same bits for any thread count.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/train/parameters.h"

namespace posenc {

/// AdamW hyper-parameters (defaults: PyTorch's torch.optim.AdamW).
struct AdamWConfig {
  double beta1 = 0.9;           // first-moment decay
  double beta2 = 0.999;         // second-moment decay
  double eps = 1e-8;            // added to sqrt(v_hat)
  double weight_decay = 0.01;   // decoupled: p *= 1 - lr * weight_decay, on tensors with decay set only
};

/// Errors: ConfigError naming the field and value unless beta1, beta2 are in [0, 1), eps is finite and > 0 and
/// weight_decay is finite and >= 0.
void ValidateAdamWConfig(const AdamWConfig& config);

/// AdamW state (step count and moments) for one parameter layout.
template <typename T>
class AdamW {
 public:
  /// Moments zero, step 0. Errors: as ValidateAdamWConfig.
  AdamW(const ParameterLayout& layout, const AdamWConfig& config);

  /// One update with learning rate lr (t = step() + 1 afterwards), per element, in this order (PyTorch 1.13
  /// `_single_tensor_adamw`):
  ///   p *= 1 - lr * weight_decay               (tensors with decay only)
  ///   m = beta1 m + (1 - beta1) g;   v = beta2 v + (1 - beta2) g^2
  ///   p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
  /// Scalars (bias corrections, step size) in float64, rounded once to T; element math in T.
  ///
  /// Shapes:  params, grads [layout.total()].
  /// Errors:  ShapeError if a span has another size; ConfigError if lr is not finite or < 0.
  /// Source:  Loshchilov & Hutter 2019 (AdamW), Algorithm 2; torch.optim.AdamW (1.13).
  void Step(std::span<T> params, std::span<const T> grads, double lr);

  /// Restores a saved state (resuming a run): the step count and both moments.
  /// Errors: ShapeError if m or v has another size than the layout; RangeError if step < 0.
  void Restore(int64_t step, std::span<const T> m, std::span<const T> v);

  int64_t step() const { return step_; }
  std::span<const T> m() const { return m_; }
  std::span<const T> v() const { return v_; }

 private:
  AdamWConfig config_;
  std::vector<uint8_t> decay_;  // [total]: 1 where weight decay applies
  std::vector<T> m_;
  std::vector<T> v_;
  int64_t step_ = 0;
};

/// sqrt(sum of g^2) over all gradients, summed in float64 over fixed blocks in block order (thread-count
/// independent). NaN if an element is NaN, infinity if one is infinite. Source: torch.nn.utils.clip_grad_norm_
/// (norm_type 2; the norm of the whole buffer equals its norm of per-tensor norms).
template <typename T>
double GradientNorm(std::span<const T> grads);

/// Scales every gradient by max_norm / (norm + 1e-6) when that is < 1 (PyTorch clip_grad_norm_); returns the
/// factor applied (1 when not clipped). norm is GradientNorm(grads).
/// Errors: ConfigError if max_norm is not > 0 or norm is not finite (a non-finite gradient is reported by the
/// trainer before clipping).
template <typename T>
double ClipGradients(std::span<T> grads, double norm, double max_norm);

}  // namespace posenc
