#include "posenc/train/optimizer.h"

#include <fmt/format.h>

#include <cmath>

#include "posenc/core/errors.h"
#include "posenc/model/layers/parallel.h"

namespace posenc {
namespace {

constexpr int64_t kMinElements = 1 << 15;  // elements per thread piece of the element-wise updates

}  // namespace

void ValidateAdamWConfig(const AdamWConfig& c) {
  if (!(c.beta1 >= 0.0 && c.beta1 < 1.0)) throw ConfigError(fmt::format("beta1 must be in [0, 1), got {}", c.beta1));
  if (!(c.beta2 >= 0.0 && c.beta2 < 1.0)) throw ConfigError(fmt::format("beta2 must be in [0, 1), got {}", c.beta2));
  if (!std::isfinite(c.eps) || c.eps <= 0.0) throw ConfigError(fmt::format("eps must be finite and > 0, got {}", c.eps));
  if (!std::isfinite(c.weight_decay) || c.weight_decay < 0.0) {
    throw ConfigError(fmt::format("weight_decay must be finite and >= 0, got {}", c.weight_decay));
  }
}

template <typename T>
AdamW<T>::AdamW(const ParameterLayout& layout, const AdamWConfig& config) : config_(config) {
  ValidateAdamWConfig(config);
  decay_.assign(static_cast<size_t>(layout.total()), 0);
  for (const ParameterTensor& t : layout.tensors()) {
    if (t.decay) std::fill(decay_.begin() + t.offset, decay_.begin() + t.offset + t.size(), uint8_t{1});
  }
  m_.assign(decay_.size(), T{0});
  v_.assign(decay_.size(), T{0});
}

template <typename T>
void AdamW<T>::Step(std::span<T> params, std::span<const T> grads, double lr) {
  if (params.size() != m_.size() || grads.size() != m_.size()) {
    throw ShapeError(fmt::format("AdamW::Step: params and grads must hold {} elements, got {} and {}", m_.size(),
                                 params.size(), grads.size()));
  }
  if (!std::isfinite(lr) || lr < 0.0) throw ConfigError(fmt::format("learning rate must be finite and >= 0, got {}", lr));
  ++step_;
  const double t = static_cast<double>(step_);
  const T decay = static_cast<T>(1.0 - lr * config_.weight_decay);
  const T b1 = static_cast<T>(config_.beta1), b2 = static_cast<T>(config_.beta2);
  const T a1 = static_cast<T>(1.0 - config_.beta1), a2 = static_cast<T>(1.0 - config_.beta2);
  const T step_size = static_cast<T>(lr / (1.0 - std::pow(config_.beta1, t)));
  const T bc2_sqrt = static_cast<T>(std::sqrt(1.0 - std::pow(config_.beta2, t)));
  const T eps = static_cast<T>(config_.eps);
  T* p = params.data();
  const T* g = grads.data();
  T* m = m_.data();
  T* v = v_.data();
  const uint8_t* dm = decay_.data();
  layers::ForEachPiece(static_cast<int64_t>(m_.size()), kMinElements, [&](int64_t, int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) {
      const T pi = dm[i] ? p[i] * decay : p[i];
      const T mi = m[i] * b1 + g[i] * a1;
      const T vi = v[i] * b2 + g[i] * g[i] * a2;
      m[i] = mi;
      v[i] = vi;
      p[i] = pi - step_size * (mi / (std::sqrt(vi) / bc2_sqrt + eps));
    }
  });
}

template <typename T>
double GradientNorm(std::span<const T> grads) {
  const T* g = grads.data();
  double sum = 0.0;
  layers::ReduceRowBlocks(
      static_cast<int64_t>(grads.size()), 1,
      [&](int64_t i0, int64_t i1, double* acc) {
        double s = 0.0;
#pragma omp simd reduction(+ : s)
        for (int64_t i = i0; i < i1; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
        acc[0] += s;
      },
      &sum);
  return std::sqrt(sum);
}

template <typename T>
double ClipGradients(std::span<T> grads, double norm, double max_norm) {
  if (!(max_norm > 0.0)) throw ConfigError(fmt::format("gradient clip max_norm must be > 0, got {}", max_norm));
  if (!std::isfinite(norm)) throw ConfigError(fmt::format("cannot clip gradients whose norm is {}", norm));
  const double coef = max_norm / (norm + 1e-6);
  if (coef >= 1.0) return 1.0;
  const T f = static_cast<T>(coef);
  T* g = grads.data();
  layers::ForEachPiece(static_cast<int64_t>(grads.size()), kMinElements, [&](int64_t, int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) g[i] *= f;
  });
  return coef;
}

template <typename T>
void AdamW<T>::Restore(int64_t step, std::span<const T> m, std::span<const T> v) {
  if (m.size() != m_.size() || v.size() != v_.size()) {
    throw ShapeError(fmt::format("AdamW::Restore: moments must have {} elements, got {} and {}", m_.size(),
                                 m.size(), v.size()));
  }
  if (step < 0) throw RangeError(fmt::format("AdamW::Restore: step must be >= 0, got {}", step));
  std::copy(m.begin(), m.end(), m_.begin());
  std::copy(v.begin(), v.end(), v_.begin());
  step_ = step;
}

template class AdamW<float>;
template class AdamW<double>;
template double GradientNorm<float>(std::span<const float>);
template double GradientNorm<double>(std::span<const double>);
template double ClipGradients<float>(std::span<float>, double, double);
template double ClipGradients<double>(std::span<double>, double, double);

}  // namespace posenc
