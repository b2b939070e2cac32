// Scalar twins of the quantized-row kernels (quant_dot.cc): DequantizeRow, then plain float32 loops.
#include <vector>

#include "posenc/kernels/dequant.h"
#include "posenc/kernels/quant_dot.h"

namespace posenc::kernels {

void DequantizeRowsScalar(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, float* dst,
                          int64_t ld_dst) {
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) DequantizeRow(type, base + r * row_bytes, dst + r * ld_dst, in);
}

void QuantDotRowsScalar(GgmlType type, const void* w, int64_t row_bytes, int64_t rows, int64_t in, const float* x,
                        int64_t n, float* y, int64_t ldy) {
  if (rows <= 0 || n <= 0) return;
  std::vector<float> row(static_cast<size_t>(in > 0 ? in : 0));
  const auto* base = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(type, base + r * row_bytes, row.data(), in);
    for (int64_t i = 0; i < n; ++i) {
      const float* xi = x + i * in;
      float sum = 0.0f;
      for (int64_t k = 0; k < in; ++k) sum += xi[k] * row[static_cast<size_t>(k)];
      y[i * ldy + r] = sum;
    }
  }
}

}  // namespace posenc::kernels
