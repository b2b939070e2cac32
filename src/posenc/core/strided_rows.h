// Strided arrays of rows in memory: whether their extent fits the address arithmetic, and whether two of them
// share bytes. The rotation calls (C++, C API, Python) check their views with these before touching memory.
#pragma once

#include <cstdint>
#include <span>

namespace posenc {

/// An array of rows in memory: row idx (a multi-index over `shape`) is `row_bytes` contiguous bytes starting at
/// `base + sum_i idx[i] * stride_bytes[i]`. Strides may be negative or zero; shape entries must be >= 0.
struct StridedRows {
  const void* base = nullptr;
  std::span<const int64_t> shape;
  std::span<const int64_t> stride_bytes;  // one per shape entry
  int64_t row_bytes = 0;
};

/// The byte range [lo, hi) the rows reach, relative to `base`, computed without overflow; false when an
/// offset does not fit in int64_t (then no pointer arithmetic over it is defined) or a size is negative. An
/// empty array (a zero in shape, or row_bytes 0) reaches nothing: lo = hi = 0. Errors: none.
bool RowsExtent(const StridedRows& rows, int64_t& lo, int64_t& hi);

/// Whether any byte of a row of `a` is also a byte of a row of `b`: exact (not a bounding-box test). Two arrays
/// whose byte ranges are disjoint are told apart in O(rank); otherwise every row's start is sorted (O(n log n)
/// in the rows of both), so interleaved views of one buffer (q and k of a fused qkv projection) are allowed.
/// Both must pass RowsExtent. Errors: none.
bool RowsShareMemory(const StridedRows& a, const StridedRows& b);

}  // namespace posenc
