// Log-sum-exp of a float32 logits row in float64, for the negative log-likelihood of a prediction. Pointers
// and sizes only; LogSumExp (log_sum_exp_kernels.cc, Highway) is what eval runs and LogSumExpScalar
// (log_sum_exp_kernels_scalar.cc) the reference it is tested against on every target.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// log(sum_i e^logits[i]) = m + log(sum_i e^(logits[i] - m)), m = max_i logits[i], in float64.
///
/// Shapes:    logits [n], n >= 1 (the caller checks).
/// Precision: every term is formed exactly (float32 logits widened to double, minus m) and exponentiated by
///            ExpF64 (Cephes `exp`, within 2 ulp for arguments in [-708, 0]; below -708 the argument is
///            clamped, adding at most n * 3.3e-308 to a sum that contains the term 1). The terms are bit
///            for bit those of LogSumExpScalar; only the order of the float64 sum differs (lanes, then a
///            pairwise reduction), so the two agree within n * 2^-53 relative in the sum.
///            So -log softmax(logits)[t] = LogSumExp - logits[t] matches a float64 log-softmax to ~1e-15.
/// Non-finite logits: the result is unspecified (callers check with FirstNonFinite first).
/// Source:    the numpy oracle's `log_softmax` (float64); Cephes exp (S. Moshier).
double LogSumExp(const float* logits, int64_t n);

/// Scalar reference of LogSumExp: max in order, then the terms summed in index order.
double LogSumExpScalar(const float* logits, int64_t n);

/// e^x in float64 for x in [-708, 0] within 2 ulp (Cephes `exp`: x = k ln2 + r with ln2 in two parts,
/// e^r = 1 + 2 r P(r^2) / (Q(r^2) - r P(r^2))); x < -708 is clamped to -708. The scalar form of the
/// lanes LogSumExp computes.
double ExpF64(double x);

/// Name of the Highway target LogSumExp dispatches to ("AVX2", ...).
const char* LogSumExpTargetName();

}  // namespace posenc::kernels
