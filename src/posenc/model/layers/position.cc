// Absolute position tables: see position.h.
#include "posenc/model/layers/position.h"

#include <fmt/format.h>

#include <span>
#include <type_traits>

#include "posenc/core/errors.h"
#include "posenc/pe/learned.h"

namespace posenc {
namespace {

void Check(const char* name, int64_t table_rows, int64_t dim, int64_t batch, int64_t ctx, const void* a,
           const void* b) {
  if (table_rows < 1 || dim < 1 || batch < 0 || ctx < 0) {
    throw ShapeError(fmt::format("{}: table_rows and dim must be >= 1, batch and ctx >= 0, got {}, {}, {}, {}", name,
                                 table_rows, dim, batch, ctx));
  }
  if (ctx > table_rows) {
    throw RangeError(fmt::format("{}: ctx = {} positions need table rows [0, {}), but the position table has {} rows "
                                 "(max_seq_len)", name, ctx, ctx, table_rows));
  }
  if (batch * ctx > 0 && (a == nullptr || b == nullptr)) {
    throw ShapeError(fmt::format("{}: null table or activations for batch {} x ctx {}", name, batch, ctx));
  }
}

}  // namespace

template <typename T>
void PositionTableForward(const T* table, int64_t table_rows, int64_t dim, int64_t batch, int64_t ctx, T* x) {
  // table [table_rows, dim]; x [batch, ctx, dim] +=
  Check("PositionTableForward", table_rows, dim, batch, ctx, table, x);
  for (int64_t b = 0; b < batch; ++b) {
    T* xb = x + b * ctx * dim;
    if constexpr (std::is_same_v<T, float>) {
      LearnedPeForwardAdd(std::span<const float>(table, static_cast<size_t>(table_rows * dim)), dim, 0, ctx,
                          std::span<float>(xb, static_cast<size_t>(ctx * dim)));
    } else {
      for (int64_t i = 0; i < ctx * dim; ++i) xb[i] += table[i];
    }
  }
}

template <typename T>
void PositionTableBackward(const T* dx, int64_t table_rows, int64_t dim, int64_t batch, int64_t ctx, T* dtable) {
  // dx [batch, ctx, dim]; dtable [table_rows, dim] +=
  Check("PositionTableBackward", table_rows, dim, batch, ctx, dtable, dx);
  for (int64_t b = 0; b < batch; ++b) {
    const T* db = dx + b * ctx * dim;
    if constexpr (std::is_same_v<T, float>) {
      LearnedPeBackward(dim, 0, ctx, std::span<const float>(db, static_cast<size_t>(ctx * dim)),
                        std::span<float>(dtable, static_cast<size_t>(table_rows * dim)));
    } else {
      for (int64_t i = 0; i < ctx * dim; ++i) dtable[i] += db[i];
    }
  }
}

template void PositionTableForward<float>(const float*, int64_t, int64_t, int64_t, int64_t, float*);
template void PositionTableForward<double>(const double*, int64_t, int64_t, int64_t, int64_t, double*);
template void PositionTableBackward<float>(const float*, int64_t, int64_t, int64_t, int64_t, float*);
template void PositionTableBackward<double>(const double*, int64_t, int64_t, int64_t, int64_t, double*);

}  // namespace posenc
