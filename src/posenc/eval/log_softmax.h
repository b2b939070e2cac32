// Log-sum-exp of a logits row in float64, for the NLL of a prediction.
#pragma once

#include <cstdint>

namespace posenc {

/// log(sum_i e^logits[i]) in float64: m + log(sum_i e^(logits[i] - m)) with m = max_i logits[i]; every term
/// is formed exactly in double (float32 logits), e^x within 2 ulp (simd8.h ExpD4), the sum in double.
/// So -log softmax(logits)[t] = LogSumExp - logits[t] matches a float64 log-softmax to ~1e-15 relative.
/// Shapes: logits [n], n >= 1. Errors: none (callers check n). Source: ref_llama2c.py `log_softmax`.
double LogSumExp(const float* logits, int64_t n);

}  // namespace posenc
