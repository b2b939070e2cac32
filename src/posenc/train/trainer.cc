#include "posenc/train/trainer.h"

#include <fmt/format.h>

#include <cmath>
#include <string>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

std::string Where(const NonFiniteAt& at) {
  const std::string layer = at.layer >= 0 ? fmt::format("layer {}", at.layer) : std::string("outside the blocks");
  return fmt::format("{}, tensor {}, element {} = {}", layer, at.tensor, at.index, at.value);
}

}  // namespace

template <typename T>
Trainer<T>::Trainer(TrainModel<T>& model, const TrainerOptions& options)
    : model_(model), options_(options), adamw_(model.layout(), options.adamw) {
  ValidateLrSchedule(options.schedule);
  if (!std::isfinite(options.grad_clip) || options.grad_clip < 0.0) {
    throw ConfigError(fmt::format("grad_clip must be finite and >= 0 (0: no clipping), got {}", options.grad_clip));
  }
}

template <typename T>
void ThrowIfLossNotFinite(const TrainModel<T>& model, const Activations<T>& acts, int64_t step, double loss) {
  if (std::isfinite(loss)) return;
  if (auto at = model.FirstNonFiniteParameter()) {
    throw NumericError(fmt::format("step {}: the loss is {}; parameter in {} is not finite", step, loss, Where(*at)));
  }
  if (auto at = model.FirstNonFiniteActivation(acts)) {
    throw NumericError(fmt::format("step {}: the loss is {}; the first non-finite value of the forward pass is in {}",
                                   step, loss, Where(*at)));
  }
  throw NumericError(fmt::format("step {}: the loss is {} (every activation is finite: the loss itself overflowed)",
                                 step, loss));
}

template <typename T>
void ThrowIfGradientsNotFinite(const TrainModel<T>& model, int64_t step, double grad_norm) {
  if (std::isfinite(grad_norm)) return;
  if (auto at = model.FirstNonFiniteParameter()) {
    throw NumericError(fmt::format("step {}: the gradient norm is {}; parameter in {} is not finite", step, grad_norm,
                                   Where(*at)));
  }
  if (auto at = model.FirstNonFiniteGradient()) {
    throw NumericError(fmt::format("step {}: non-finite gradient (first in backward order) in {}", step, Where(*at)));
  }
  throw NumericError(fmt::format("step {}: the gradient norm is {} (every gradient element is finite: the sum of "
                                 "squares overflowed)", step, grad_norm));
}

template <typename T>
StepResult Trainer<T>::Step(const TokenBatch& batch, const AttentionRope& rope) {
  StepResult r;
  r.step = step_;
  r.lr = options_.schedule.At(step_);
  // A non-finite weight is named before anything runs: the attention kernels do not promise to carry a NaN of
  // q or k into the loss, so the loss check alone could miss it.
  if (auto at = model_.FirstNonFiniteParameter()) {
    throw NumericError(fmt::format("step {}: parameter in {} is not finite", step_, Where(*at)));
  }
  model_.ZeroGradients();
  r.loss = model_.Forward(batch, rope, acts_);
  ThrowIfLossNotFinite(model_, acts_, step_, r.loss);
  model_.Backward(batch, rope, acts_);
  r.grad_norm = GradientNorm<T>(model_.gradients());
  ThrowIfGradientsNotFinite(model_, step_, r.grad_norm);
  if (options_.grad_clip > 0.0) ClipGradients<T>(model_.gradients(), r.grad_norm, options_.grad_clip);
  adamw_.Step(model_.parameters(), model_.gradients(), r.lr);
  ++step_;
  return r;
}

template <typename T>
void Trainer<T>::Restore(int64_t step, std::span<const T> m, std::span<const T> v) {
  adamw_.Restore(step, m, v);
  step_ = step;
}

template class Trainer<float>;
template class Trainer<double>;
template void ThrowIfLossNotFinite<float>(const TrainModel<float>&, const Activations<float>&, int64_t, double);
template void ThrowIfLossNotFinite<double>(const TrainModel<double>&, const Activations<double>&, int64_t, double);
template void ThrowIfGradientsNotFinite<float>(const TrainModel<float>&, int64_t, double);
template void ThrowIfGradientsNotFinite<double>(const TrainModel<double>&, int64_t, double);

}  // namespace posenc
