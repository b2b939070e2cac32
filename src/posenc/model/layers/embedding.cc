// Token embedding layer: see embedding.h.
#include "posenc/model/layers/embedding.h"

#include <fmt/format.h>

#include <type_traits>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/kernels/pe_kernels.h"

namespace posenc {
namespace {

// Validates the call and returns the token ids widened to the row kernel's int64.
std::vector<int64_t> Rows(const char* name, std::span<const int32_t> tokens, int64_t vocab_size, int64_t dim,
                          const void* table, const void* rows) {
  if (vocab_size < 1 || dim < 1) {
    throw ShapeError(fmt::format("{}: vocab_size and dim must be >= 1, got {} and {}", name, vocab_size, dim));
  }
  std::vector<int64_t> ids(tokens.size());
  for (size_t r = 0; r < tokens.size(); ++r) {
    if (tokens[r] < 0 || tokens[r] >= vocab_size) {
      throw RangeError(fmt::format("{}: token id at index {} must be in [0, vocab_size={}), got {}", name, r,
                                   vocab_size, tokens[r]));
    }
    ids[r] = tokens[r];
  }
  if (!tokens.empty() && (table == nullptr || rows == nullptr)) {
    throw ShapeError(fmt::format("{}: null table or rows for {} tokens", name, tokens.size()));
  }
  return ids;
}

}  // namespace

template <typename T>
void EmbeddingForward(std::span<const int32_t> tokens, const T* table, int64_t vocab_size, int64_t dim, T* out) {
  // tokens [n], table [vocab_size, dim] -> out [n, dim]
  const std::vector<int64_t> ids = Rows("EmbeddingForward", tokens, vocab_size, dim, table, out);
  const int64_t n = static_cast<int64_t>(ids.size());
  if constexpr (std::is_same_v<T, float>) {
    kernels::PeRowsKernel({.op = kernels::PeRowsOp::kGather, .n_tokens = n, .d_model = dim, .tokens = out,
                           .token_stride = dim, .table = const_cast<float*>(table), .table_stride = dim,
                           .rows = ids.data(), .row_offset = 0});  // kGather only reads the table
  } else {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < dim; ++c) out[r * dim + c] = table[ids[static_cast<size_t>(r)] * dim + c];
    }
  }
}

template <typename T>
void EmbeddingBackward(std::span<const int32_t> tokens, const T* dout, int64_t vocab_size, int64_t dim, T* dtable) {
  // tokens [n], dout [n, dim]; dtable [vocab_size, dim] +=
  const std::vector<int64_t> ids = Rows("EmbeddingBackward", tokens, vocab_size, dim, dtable, dout);
  const int64_t n = static_cast<int64_t>(ids.size());
  if constexpr (std::is_same_v<T, float>) {
    kernels::PeRowsKernel({.op = kernels::PeRowsOp::kScatterAdd, .n_tokens = n, .d_model = dim,
                           .tokens = const_cast<float*>(dout), .token_stride = dim, .table = dtable,
                           .table_stride = dim, .rows = ids.data(), .row_offset = 0});  // reads the tokens only
  } else {
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < dim; ++c) dtable[ids[static_cast<size_t>(r)] * dim + c] += dout[r * dim + c];
    }
  }
}

template void EmbeddingForward<float>(std::span<const int32_t>, const float*, int64_t, int64_t, float*);
template void EmbeddingForward<double>(std::span<const int32_t>, const double*, int64_t, int64_t, double*);
template void EmbeddingBackward<float>(std::span<const int32_t>, const float*, int64_t, int64_t, float*);
template void EmbeddingBackward<double>(std::span<const int32_t>, const double*, int64_t, int64_t, double*);

}  // namespace posenc
