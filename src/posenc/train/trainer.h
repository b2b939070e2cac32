// One training step: zero the gradients, forward, backward, check for NaN / infinity, clip, AdamW.
#pragma once

#include <cstdint>

#include "posenc/train/lr_schedule.h"
#include "posenc/train/optimizer.h"
#include "posenc/train/train_model.h"

namespace posenc {

/// How a Trainer updates its model.
struct TrainerOptions {
  AdamWConfig adamw;
  LrSchedule schedule;
  double grad_clip = 1.0;  // max global L2 norm of the gradients; 0 disables clipping
};

/// What one step did.
struct StepResult {
  int64_t step = 0;        // 0-based index of the step just taken
  double loss = 0;         // mean loss of the batch before the update (nats per target)
  double grad_norm = 0;    // global L2 norm of the gradients before clipping
  double lr = 0;           // learning rate used
};

/// The checks Trainer::Step makes, for callers running their own loop (e.g. several micro-batches per step).
/// ThrowIfLossNotFinite: if loss is not finite, NumericError naming `step` and the first non-finite parameter
/// (buffer order) or else the first non-finite activation of `acts` (forward order), each with its layer and
/// tensor. ThrowIfGradientsNotFinite: if grad_norm is not finite, NumericError naming `step` and the first
/// non-finite parameter, or else the first non-finite gradient in backward order (its layer and tensor). Both
/// return normally otherwise.
template <typename T>
void ThrowIfLossNotFinite(const TrainModel<T>& model, const Activations<T>& acts, int64_t step, double loss);
template <typename T>
void ThrowIfGradientsNotFinite(const TrainModel<T>& model, int64_t step, double grad_norm);

/// Trains a model in place. Deterministic: for a fixed seed and data, the weights after n steps are the same bits
/// on every run and for any thread count (every reduction runs in a fixed order and every BLAS call has a fixed
/// shape: model/layers/parallel.h); on another CPU the Highway target and OpenBLAS kernels may round differently.
template <typename T>
class Trainer {
 public:
  /// Errors: ConfigError from ValidateAdamWConfig / ValidateLrSchedule, or if grad_clip is < 0 or not finite.
  Trainer(TrainModel<T>& model, const TrainerOptions& options);

  /// One step on one batch. If a parameter is not finite, nothing runs and NumericError names the step and the
  /// first such parameter (buffer order: its layer, tensor and element). If the loss is not finite, nothing is
  /// updated and NumericError names the step and the first non-finite activation (forward order: its layer and
  /// tensor); if a gradient is not finite, nothing is updated and NumericError names the step and the first
  /// non-finite gradient in backward order (its layer and tensor). The weights then remain those of the
  /// last good step. Errors: everything TrainModel::Forward throws; NumericError as above.
  StepResult Step(const TokenBatch& batch, const AttentionRope& rope);

  /// Resumes from a saved state: the next Step is step `step` (its learning rate from the schedule) and AdamW
  /// continues from its moments. Errors: as AdamW::Restore.
  void Restore(int64_t step, std::span<const T> m, std::span<const T> v);

  int64_t step() const { return step_; }
  Activations<T>& activations() { return acts_; }
  const AdamW<T>& optimizer() const { return adamw_; }

 private:
  TrainModel<T>& model_;
  TrainerOptions options_;
  AdamW<T> adamw_;
  Activations<T> acts_;
  int64_t step_ = 0;
};

}  // namespace posenc
