#include "posenc/rope/apply.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/core/errors.h"
#include "posenc/core/strided_rows.h"
#include "posenc/kernels/rope_kernels.h"
#include "posenc/kernels/sincos.h"

namespace posenc {
namespace {

// Out-of-place calls copy and rotate blocks of about this many bytes of input tokens (see ApplyRope(in, out)).
constexpr int64_t kOutOfPlaceBlockBytes = int64_t{256} << 10;

// Whether two (token, head) rows of head_dim elements, at offsets t * token_stride + h * head_stride, overlap.
// The two usual layouts are recognised in O(1) (token-major: a token's heads inside |token_stride|;
// head-major: a head's tokens inside |head_stride|); any other stride pair is checked exactly by sorting the
// offsets.
bool RowsOverlap(const HeadsView& x) {
  if (x.n_tokens <= 1 && x.n_heads <= 1) return false;
  using Wide = __int128;
  const Wide hd = x.head_dim, nt = x.n_tokens, nh = x.n_heads;
  const Wide ts = x.token_stride < 0 ? -Wide{x.token_stride} : Wide{x.token_stride};
  const Wide hs = x.head_stride < 0 ? -Wide{x.head_stride} : Wide{x.head_stride};
  const bool heads_apart = nh == 1 || hs >= hd, tokens_apart = nt == 1 || ts >= hd;
  if (heads_apart && (nt == 1 || ts >= (nh - 1) * hs + hd)) return false;  // token-major
  if (tokens_apart && (nh == 1 || hs >= (nt - 1) * ts + hd)) return false;  // head-major
  // n rows of head_dim apart need a span of at least n * head_dim elements (pigeonhole): no sort needed to refuse.
  if ((nt - 1) * ts + (nh - 1) * hs + hd < nt * nh * hd) return true;
  std::vector<Wide> offsets;
  offsets.reserve(static_cast<size_t>(x.n_tokens * x.n_heads));
  for (int64_t t = 0; t < x.n_tokens; ++t) {
    for (int64_t h = 0; h < x.n_heads; ++h) offsets.push_back(Wide{t} * x.token_stride + Wide{h} * x.head_stride);
  }
  std::sort(offsets.begin(), offsets.end());
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] - offsets[i - 1] < hd) return true;
  }
  return false;
}

// The rows of a view as a StridedRows in bytes, strides widened first. False when a stride or the row in bytes
// does not fit in int64_t.
bool ViewRows(const HeadsView& x, std::array<int64_t, 2>& shape, std::array<int64_t, 2>& strides, StridedRows& r) {
  using Wide = __int128;
  const Wide es = DTypeSize(x.dtype);
  const Wide ts = Wide{x.token_stride} * es, hs = Wide{x.head_stride} * es, row = Wide{x.head_dim} * es;
  const Wide max = std::numeric_limits<int64_t>::max();
  if (ts > max || -ts > max || hs > max || -hs > max || row > max) return false;
  shape = {x.n_tokens, x.n_heads};
  strides = {static_cast<int64_t>(ts), static_cast<int64_t>(hs)};
  r = {x.data, shape, strides, static_cast<int64_t>(row)};
  return true;
}

// Every byte a non-empty view reaches, [data + lo, data + hi), must be addressable: the kernels compute
// t * token_stride + h * head_stride + c in int64_t and add it to data, so an extent past 64 bits (or past
// the ends of the address space) would wrap to memory the caller never gave.
void CheckExtent(const char* name, const HeadsView& x) {
  std::array<int64_t, 2> shape{}, strides{};
  StridedRows rows;
  int64_t lo = 0, hi = 0;
  const __int128 addr = static_cast<__int128>(reinterpret_cast<uintptr_t>(x.data));
  if (!ViewRows(x, shape, strides, rows) || !RowsExtent(rows, lo, hi) || addr + lo < 0 ||
      addr + hi > static_cast<__int128>(std::numeric_limits<uintptr_t>::max())) {
    throw ShapeError(fmt::format("{}: token_stride = {} and head_stride = {} over {} tokens x {} heads of head_dim = "
                                 "{} reach beyond what a 64-bit offset from data can address", name, x.token_stride,
                                 x.head_stride, x.n_tokens, x.n_heads, x.head_dim));
  }
}

// Two views written by one call (q and k, in and out) must not share memory (a shared row would turn twice).
void CheckDisjoint(const char* a_name, const HeadsView& a, const char* b_name, const HeadsView& b) {
  std::array<int64_t, 2> sa{}, ta{}, sb{}, tb{};
  StridedRows ra, rb;
  if (ViewRows(a, sa, ta, ra) && ViewRows(b, sb, tb, rb) && !RowsShareMemory(ra, rb)) return;
  throw ShapeError(fmt::format("{} and {} share memory: a row of one is (part of) a row of the other, so it would "
                               "be rotated twice; pass separate buffers (views of one buffer that do not overlap "
                               "are fine)", a_name, b_name));
}

void CheckView(const char* name, const HeadsView& x, int64_t half) {
  if (x.n_tokens < 0 || x.n_heads < 0 || x.head_dim < 0) {
    throw ShapeError(fmt::format("{} shape must be non-negative, got [{}, {}, {}]", name, x.n_tokens, x.n_heads,
                                 x.head_dim));
  }
  if (half < 1) throw ShapeError(fmt::format("cos/sin table half (rotary_dim/2) must be >= 1, got {}", half));
  if (half > x.head_dim / 2) {  // 2 * half could overflow
    throw ShapeError(fmt::format("rotary_dim = {} must be <= {}.head_dim = {}", static_cast<__int128>(half) * 2, name,
                                 x.head_dim));
  }
  if (x.n_tokens == 0 || x.n_heads == 0) return;
  if (x.data == nullptr) throw ShapeError(fmt::format("{}.data is null for a non-empty tensor", name));
  if (x.n_heads > 1 && x.head_stride < x.head_dim && x.head_stride > -x.head_dim) {
    throw ShapeError(fmt::format("{}.head_stride = {} overlaps heads of head_dim = {}", name, x.head_stride,
                                 x.head_dim));
  }
  if (x.n_tokens > 1 && x.token_stride == 0) {
    throw ShapeError(fmt::format("{}.token_stride = 0 makes every token the same memory", name));
  }
  CheckExtent(name, x);
  if (RowsOverlap(x)) {
    throw ShapeError(fmt::format("{}: token_stride = {} and head_stride = {} make rows of head_dim = {} overlap "
                                 "({} tokens x {} heads); no two (token, head) rows may share memory",
                                 name, x.token_stride, x.head_stride, x.head_dim, x.n_tokens, x.n_heads));
  }
}

void CheckRows(std::span<const int64_t> rows, int64_t n_tokens, const CosSinView& table) {
  if (static_cast<int64_t>(rows.size()) != n_tokens) {
    throw ShapeError(fmt::format("position ids / rows must have one entry per token ({}), got {}", n_tokens,
                                 rows.size()));
  }
  if (table.cos == nullptr || table.sin == nullptr) {
    if (n_tokens > 0) throw ShapeError("cos/sin table pointers are null");
  }
  for (size_t t = 0; t < rows.size(); ++t) {
    if (rows[t] < 0 || rows[t] >= table.n_rows) {
      throw RangeError(fmt::format("row (position) {} of token {} is outside the cos/sin table [0, {})", rows[t],
                                   t, table.n_rows));
    }
  }
}

kernels::RopeKernelArgs KernelArgs(const HeadsView& x, std::span<const int64_t> rows, const CosSinView& table,
                                   RopeLayout layout, RopeDirection direction) {
  return {x.data, x.dtype, x.n_tokens, x.n_heads, x.token_stride, x.head_stride, rows.data(), table.cos,
          table.sin, table.half, layout, direction};
}

// On-the-fly mode: finite frequencies and factor, positions where the angle and its reduction are exact.
void CheckOnTheFly(std::span<const int64_t> position_ids, int64_t n_tokens, const RopeOnTheFly& f) {
  if (static_cast<int64_t>(position_ids.size()) != n_tokens) {
    throw ShapeError(fmt::format("position_ids must have one entry per token ({}), got {}", n_tokens,
                                 position_ids.size()));
  }
  double max_inv = 0.0;
  for (size_t i = 0; i < f.inv_freq.size(); ++i) {
    if (!std::isfinite(f.inv_freq[i])) {
      throw ConfigError(fmt::format("inv_freq[{}] = {} is not finite", i, f.inv_freq[i]));
    }
    max_inv = std::max(max_inv, std::fabs(static_cast<double>(f.inv_freq[i])));
  }
  if (!std::isfinite(f.attention_factor)) {
    throw ConfigError(fmt::format("attention_factor = {} is not finite", f.attention_factor));
  }
  const double limit = static_cast<double>(kernels::kSinCosMaxAbs);
  for (size_t t = 0; t < position_ids.size(); ++t) {
    const double pos = std::fabs(static_cast<double>(position_ids[t]));
    if (pos >= limit || pos * max_inv >= limit) {
      throw RangeError(fmt::format("position_ids[{}] = {}: on-the-fly cos/sin need |position| < 2^29 and "
                                   "|position * inv_freq| < 2^29 rad (largest inv_freq {})",
                                   t, position_ids[t], max_inv));
    }
  }
}

kernels::RopeKernelArgs OnTheFlyArgs(const HeadsView& x, std::span<const int64_t> position_ids,
                                     const RopeOnTheFly& f, RopeLayout layout, RopeDirection direction) {
  kernels::RopeKernelArgs a = KernelArgs(x, position_ids, CosSinView{nullptr, nullptr, 0,
                                                                     static_cast<int64_t>(f.inv_freq.size())},
                                         layout, direction);
  a.inv_freq = f.inv_freq.data();
  a.attention_factor = f.attention_factor;
  a.precision = f.precision;
  return a;
}

}  // namespace

void CheckHeadsView(const char* name, const HeadsView& x, int64_t half) { CheckView(name, x, half); }

void HalfSplitToInterleaved(float* x, int64_t n_groups, int64_t head_dim, int64_t rotary_dim, int64_t cols) {
  const int64_t half = rotary_dim / 2;
  std::vector<float> head(static_cast<size_t>(rotary_dim * cols));
  for (int64_t g = 0; g < n_groups; ++g) {
    float* rows = x + g * head_dim * cols;
    for (int64_t i = 0; i < half; ++i) {
      std::copy_n(rows + i * cols, cols, head.begin() + (2 * i) * cols);
      std::copy_n(rows + (half + i) * cols, cols, head.begin() + (2 * i + 1) * cols);
    }
    std::copy(head.begin(), head.end(), rows);
  }
}

const char* RopeLayoutName(RopeLayout layout) {
  return layout == RopeLayout::kHalfSplit ? "half-split" : "interleaved";
}

void ApplyRope(const HeadsView& x, std::span<const int64_t> rows, const CosSinView& table, RopeLayout layout,
               RopeDirection direction) {
  CheckView("x", x, table.half);
  CheckRows(rows, x.n_tokens, table);
  if (x.n_tokens == 0 || x.n_heads == 0) return;
  kernels::RopeKernel(KernelArgs(x, rows, table, layout, direction));
}

void ApplyRope(const HeadsView& in, const HeadsView& out, std::span<const int64_t> rows, const CosSinView& table,
               RopeLayout layout, RopeDirection direction) {
  if (in.n_tokens != out.n_tokens || in.n_heads != out.n_heads || in.head_dim != out.head_dim ||
      in.dtype != out.dtype) {
    throw ShapeError(fmt::format("in and out must have the same shape and dtype, got [{}, {}, {}] {} and "
                                 "[{}, {}, {}] {}", in.n_tokens, in.n_heads, in.head_dim, DTypeName(in.dtype),
                                 out.n_tokens, out.n_heads, out.head_dim, DTypeName(out.dtype)));
  }
  CheckView("in", in, table.half);
  CheckView("out", out, table.half);
  CheckRows(rows, in.n_tokens, table);
  if (in.n_tokens == 0 || in.n_heads == 0) return;
  if (in.data == out.data && in.token_stride == out.token_stride && in.head_stride == out.head_stride) {
    kernels::RopeKernel(KernelArgs(out, rows, table, layout, direction));
    return;
  }
  CheckDisjoint("in", in, "out", out);
  // Copy a block of tokens, then rotate it while it is in cache; large calls hand the blocks to OpenMP threads
  // (inside the parallel region the kernel runs on its thread). Same bits as copy-all-then-rotate.
  const int64_t es = DTypeSize(in.dtype);
  const size_t row_bytes = static_cast<size_t>(in.head_dim) * static_cast<size_t>(es);
  const int64_t token_bytes = in.n_heads * in.head_dim * es;
  const int64_t block = std::max<int64_t>(kOutOfPlaceBlockBytes / token_bytes, 1);
  const int64_t n_blocks = (in.n_tokens + block - 1) / block;
  const auto copy_and_rotate = [&](int64_t b) {
    const int64_t t0 = b * block, t1 = std::min(in.n_tokens, t0 + block);
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t h = 0; h < in.n_heads; ++h) {
        const char* src = static_cast<const char*>(in.data) + (t * in.token_stride + h * in.head_stride) * es;
        char* dst = static_cast<char*>(out.data) + (t * out.token_stride + h * out.head_stride) * es;
        std::memcpy(dst, src, row_bytes);  // the pass-through channels stay bit-identical
      }
    }
    HeadsView part = out;
    part.data = static_cast<char*>(out.data) + t0 * out.token_stride * es;
    part.n_tokens = t1 - t0;
    kernels::RopeKernel(KernelArgs(part, rows.subspan(static_cast<size_t>(t0), static_cast<size_t>(t1 - t0)),
                                   table, layout, direction));
  };
  const int64_t bytes = 2 * in.n_tokens * token_bytes;
  int64_t threads = 1;
  if (n_blocks >= 2 && bytes >= kernels::kRopeParallelMinBytes && !omp_in_parallel()) {
    threads = std::min<int64_t>(
        {static_cast<int64_t>(omp_get_max_threads()), bytes / (kernels::kRopeParallelMinBytes / 2), n_blocks});
  }
  if (threads <= 1) {
    for (int64_t b = 0; b < n_blocks; ++b) copy_and_rotate(b);
    return;
  }
  kernels::RopeKernelTargetName();  // picks the dispatch target once, before the threads call the kernel
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast<int>(threads))
  for (int64_t b = 0; b < n_blocks; ++b) copy_and_rotate(b);
}

void ApplyRopeQK(const HeadsView& q, const HeadsView& k, std::span<const int64_t> rows, const CosSinView& table,
                 RopeLayout layout, RopeDirection direction) {
  if (q.n_tokens != k.n_tokens || q.head_dim != k.head_dim) {
    throw ShapeError(fmt::format("q and k must have the same n_tokens and head_dim, got [{}, {}, {}] and "
                                 "[{}, {}, {}]", q.n_tokens, q.n_heads, q.head_dim, k.n_tokens, k.n_heads,
                                 k.head_dim));
  }
  CheckView("q", q, table.half);
  CheckView("k", k, table.half);
  CheckDisjoint("q", q, "k", k);
  CheckRows(rows, q.n_tokens, table);
  kernels::RopeKernelQK(KernelArgs(q, rows, table, layout, direction), KernelArgs(k, rows, table, layout, direction));
}

void ApplyRope(const HeadsView& x, std::span<const int64_t> position_ids, const RopeOnTheFly& freqs,
               RopeLayout layout, RopeDirection direction) {
  const int64_t half = static_cast<int64_t>(freqs.inv_freq.size());
  CheckView("x", x, half);
  CheckOnTheFly(position_ids, x.n_tokens, freqs);
  if (x.n_tokens == 0 || x.n_heads == 0) return;
  kernels::RopeKernel(OnTheFlyArgs(x, position_ids, freqs, layout, direction));
}

void ApplyRopeQK(const HeadsView& q, const HeadsView& k, std::span<const int64_t> position_ids,
                 const RopeOnTheFly& freqs, RopeLayout layout, RopeDirection direction) {
  if (q.n_tokens != k.n_tokens || q.head_dim != k.head_dim) {
    throw ShapeError(fmt::format("q and k must have the same n_tokens and head_dim, got [{}, {}, {}] and "
                                 "[{}, {}, {}]", q.n_tokens, q.n_heads, q.head_dim, k.n_tokens, k.n_heads,
                                 k.head_dim));
  }
  const int64_t half = static_cast<int64_t>(freqs.inv_freq.size());
  CheckView("q", q, half);
  CheckView("k", k, half);
  CheckDisjoint("q", q, "k", k);
  CheckOnTheFly(position_ids, q.n_tokens, freqs);
  kernels::RopeKernelQK(OnTheFlyArgs(q, position_ids, freqs, layout, direction),
                        OnTheFlyArgs(k, position_ids, freqs, layout, direction));
}

void ApplyRope(const HeadsView& x, std::span<const int64_t> position_ids, RopeCache& cache, RopeLayout layout,
               RopeDirection direction) {
  const CosSinView table = cache.Covering(position_ids);
  ApplyRope(x, position_ids, table, layout, direction);
}

}  // namespace posenc
