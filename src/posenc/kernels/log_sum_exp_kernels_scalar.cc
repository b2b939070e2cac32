// LogSumExpScalar and ExpF64: the plain reference for the Highway LogSumExp (log_sum_exp_kernels.cc).
#include <bit>
#include <cmath>

#include "posenc/kernels/log_sum_exp_kernels.h"

namespace posenc::kernels {

double ExpF64(double x) {
  x = x < -708.0 ? -708.0 : x;
  const double shifted = x * 1.4426950408889634073599 + 6755399441055744.0;  // 1.5 * 2^52: round to nearest
  const int64_t k = std::bit_cast<int64_t>(shifted) - std::bit_cast<int64_t>(6755399441055744.0);
  const double fk = shifted - 6755399441055744.0;
  double r = x - fk * 6.93145751953125e-1;
  r = r - fk * 1.42860682030941723212e-6;
  const double rr = r * r;
  double p = 1.26177193074810590878e-4;
  p = p * rr + 3.02994407707441961300e-2;
  p = p * rr + 9.99999999999999999910e-1;
  p = p * r;
  double q = 3.00198505138664455042e-6;
  q = q * rr + 2.52448340349684104192e-3;
  q = q * rr + 2.27265548208155028766e-1;
  q = q * rr + 2.00000000000000000009e0;
  const double e = 1.0 + 2.0 * (p / (q - p));
  return e * std::bit_cast<double>((k + 1023) << 52);
}

double LogSumExpScalar(const float* logits, int64_t n) {
  float mf = logits[0];
  for (int64_t i = 1; i < n; ++i) mf = logits[i] > mf ? logits[i] : mf;
  const double m = mf;
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += ExpF64(static_cast<double>(logits[i]) - m);
  return m + std::log(sum);
}

}  // namespace posenc::kernels
