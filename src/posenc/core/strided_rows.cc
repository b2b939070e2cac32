#include "posenc/core/strided_rows.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace posenc {
namespace {

using Wide = __int128;

constexpr Wide kMax = std::numeric_limits<int64_t>::max();
constexpr Wide kMin = std::numeric_limits<int64_t>::min();

bool Empty(const StridedRows& r) {
  if (r.row_bytes == 0) return true;
  return std::any_of(r.shape.begin(), r.shape.end(), [](int64_t n) { return n == 0; });
}

// Every row's start offset (bytes from base), in row-major order.
void RowStarts(const StridedRows& r, intptr_t origin, std::vector<Wide>& out) {
  std::vector<int64_t> idx(r.shape.size(), 0);
  const Wide base = static_cast<Wide>(reinterpret_cast<intptr_t>(r.base)) - origin;
  while (true) {
    Wide off = base;
    for (size_t i = 0; i < idx.size(); ++i) off += Wide{idx[i]} * r.stride_bytes[i];
    out.push_back(off);
    size_t j = idx.size();
    while (j > 0) {
      --j;
      if (++idx[j] < r.shape[j]) break;
      idx[j] = 0;
      if (j == 0) return;
    }
    if (idx.empty()) return;
  }
}

}  // namespace

bool RowsExtent(const StridedRows& r, int64_t& lo, int64_t& hi) {
  lo = hi = 0;
  if (r.row_bytes < 0 || r.shape.size() != r.stride_bytes.size()) return false;
  if (std::any_of(r.shape.begin(), r.shape.end(), [](int64_t n) { return n < 0; })) return false;
  if (Empty(r)) return true;
  Wide wlo = 0, whi = r.row_bytes;
  for (size_t i = 0; i < r.shape.size(); ++i) {
    const Wide reach = Wide{r.shape[i] - 1} * r.stride_bytes[i];  // |.| < 2^126: no overflow
    (reach < 0 ? wlo : whi) += reach;
    if (wlo < kMin || whi > kMax) return false;
  }
  lo = static_cast<int64_t>(wlo);
  hi = static_cast<int64_t>(whi);
  return true;
}

bool RowsShareMemory(const StridedRows& a, const StridedRows& b) {
  if (Empty(a) || Empty(b)) return false;
  int64_t alo = 0, ahi = 0, blo = 0, bhi = 0;
  if (!RowsExtent(a, alo, ahi) || !RowsExtent(b, blo, bhi)) return true;  // not addressable: never "disjoint"
  const intptr_t origin = reinterpret_cast<intptr_t>(a.base);
  const Wide db = static_cast<Wide>(reinterpret_cast<intptr_t>(b.base)) - origin;
  if (Wide{ahi} <= db + blo || db + bhi <= Wide{alo}) return false;  // byte ranges apart
  struct Start {
    Wide offset;
    bool in_b;
  };
  std::vector<Wide> sa, sb;
  RowStarts(a, origin, sa);
  RowStarts(b, origin, sb);
  std::vector<Start> all;
  all.reserve(sa.size() + sb.size());
  for (Wide s : sa) all.push_back({s, false});
  for (Wide s : sb) all.push_back({s, true});
  std::sort(all.begin(), all.end(), [](const Start& x, const Start& y) { return x.offset < y.offset; });
  // Sweep in start order: a row overlaps a row of the other array that started earlier iff it starts before
  // that array's furthest end so far (rows starting later are caught when they come).
  Wide end_a = std::numeric_limits<int64_t>::min(), end_b = end_a;
  for (const Start& s : all) {
    if (s.in_b) {
      if (s.offset < end_a) return true;
      end_b = std::max(end_b, s.offset + b.row_bytes);
    } else {
      if (s.offset < end_b) return true;
      end_a = std::max(end_a, s.offset + a.row_bytes);
    }
  }
  return false;
}

}  // namespace posenc
