// Scalar reference PE kernels (PeRowsScalar, PeSgdScalar): the definition of correct every fast path is tested
// against. Plain C++, tokens in order, one element at a time; these are the loops pe/learned.cc and
// pe/sinusoidal.cc ran before the Highway kernels (llm.c `encoder_forward` / `encoder_backward` style).
#include "posenc/kernels/pe_kernels.h"

namespace posenc::kernels {

void PeRowsScalar(const PeRowsArgs& a) {
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int64_t row = a.rows != nullptr ? a.rows[t] : a.row_offset + t;
    float* tok = a.tokens + t * a.token_stride;   // [d_model]
    float* tab = a.table + row * a.table_stride;  // [d_model]
    switch (a.op) {
      case PeRowsOp::kGather:
        for (int64_t c = 0; c < a.d_model; ++c) tok[c] = tab[c];
        break;
      case PeRowsOp::kGatherAdd:
        for (int64_t c = 0; c < a.d_model; ++c) tok[c] += tab[c];
        break;
      case PeRowsOp::kScatterAdd:
        for (int64_t c = 0; c < a.d_model; ++c) tab[c] += tok[c];
        break;
    }
  }
}

void PeSgdScalar(float* w, const float* g, int64_t n, float learning_rate) {
  for (int64_t i = 0; i < n; ++i) w[i] -= learning_rate * g[i];  // fl(w - fl(lr * g)): -ffp-contract=off
}

}  // namespace posenc::kernels
