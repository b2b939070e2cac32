// A view of one tensor in a model file: its encoding, shape and bytes, without a copy.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "posenc/kernels/ggml_types.h"

namespace posenc {

/// One tensor as stored in a model file (GGUF, safetensors, llama2.c). The bytes belong to the file's mapping
/// (or to `owned`): the view is valid while the ModelFile (or reader) that produced it lives.
///
/// Shapes:  `shape` is row-major, outermost first; a weight matrix is [out_features, in_features] (y = W x), as
///          PyTorch and llama2.c store it and as GGUF's ne = [in, out] reads. Rows are contiguous: row r is
///          RowBytes() bytes at data + r * RowBytes(), encoded as `type` (dequantize with DequantizeRow).
struct TensorView {
  std::string name;                // as the file names it ("blk.0.attn_q.weight", "model.norm.weight", ...)
  GgmlType type = GgmlType::kF32;  // element encoding
  std::vector<int64_t> shape;      // row-major, outermost first
  const void* data = nullptr;      // first byte, inside the file's mapping (or inside `owned`)
  int64_t n_bytes = 0;
  /// Bytes derived from the file at load (rows reordered, a matrix transposed) that `data` points into; null
  /// for a view of the mapping itself. Shared, so copies of the view keep them alive.
  std::shared_ptr<const std::vector<uint8_t>> owned;

  /// Values per row: the innermost dimension.
  int64_t cols() const { return shape.empty() ? 1 : shape.back(); }
  /// Number of rows: the product of the outer dimensions (1 for a vector).
  int64_t rows() const {
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
  }
  int64_t n_elements() const { return rows() * cols(); }
  /// Bytes of one row.
  int64_t RowBytes() const { return GgmlRowBytes(type, cols()); }
  /// Start of row r (0 <= r < rows(); not checked).
  const uint8_t* Row(int64_t r) const { return static_cast<const uint8_t*>(data) + r * RowBytes(); }
};

}  // namespace posenc
