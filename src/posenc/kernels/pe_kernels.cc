// Highway PE kernels (PeRowsSimd / PeSgdSimd and the PeRowsKernel / PeSgdKernel the library calls): compiled
// once per x86 target by foreach_target.h and picked at run time. Dispatcher, path selection and OpenMP
// threading at the bottom (HWY_ONCE). The scalar reference lives in pe_kernels_scalar.cc.
//
// Each row is d_model contiguous floats: four full vectors per step, then single vectors, then a scalar tail
// (the same IEEE addition, so exact; nothing past channel d_model is touched). Adds are lane-wise
// hn::Add(destination, source), one rounding per element as `dst[c] += src[c]` in the reference; the SGD step
// is hn::Sub(w, hn::Mul(lr, g)), never a fused MulAdd, as the reference compiled with -ffp-contract=off.
#include "posenc/kernels/pe_kernels.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "posenc/kernels/pe_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace posenc {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::PeRowsArgs;
using kernels::PeRowsOp;

// dst[i] = src[i] for i in [0, n) (bit copy). Not std::memcpy: for rows of a few KiB glibc's memcpy (presumably its
// `rep movsb` path) measured 2-3x slower on this Zen 3 (gather 4096x768: 8.5-8.9 GB/s with memcpy per row,
// against 19.8 GB/s with this loop, minutes apart; the benchmark's plain_cpp baseline is that memcpy).
HWY_INLINE void PeCopyRow(float* dst, const float* src, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const auto v0 = hn::LoadU(d, src + i);
    const auto v1 = hn::LoadU(d, src + i + lanes);
    const auto v2 = hn::LoadU(d, src + i + 2 * lanes);
    const auto v3 = hn::LoadU(d, src + i + 3 * lanes);
    hn::StoreU(v0, d, dst + i);
    hn::StoreU(v1, d, dst + i + lanes);
    hn::StoreU(v2, d, dst + i + 2 * lanes);
    hn::StoreU(v3, d, dst + i + 3 * lanes);
  }
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
  for (; i < n; ++i) dst[i] = src[i];
}

// dst[i] = dst[i] + src[i] for i in [0, n): one float32 rounding per element, as the reference.
HWY_INLINE void PeAddRow(float* dst, const float* src, int64_t n) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  for (; i + 4 * lanes <= n; i += 4 * lanes) {
    const auto s0 = hn::LoadU(d, src + i);
    const auto s1 = hn::LoadU(d, src + i + lanes);
    const auto s2 = hn::LoadU(d, src + i + 2 * lanes);
    const auto s3 = hn::LoadU(d, src + i + 3 * lanes);
    const auto d0 = hn::LoadU(d, dst + i);
    const auto d1 = hn::LoadU(d, dst + i + lanes);
    const auto d2 = hn::LoadU(d, dst + i + 2 * lanes);
    const auto d3 = hn::LoadU(d, dst + i + 3 * lanes);
    hn::StoreU(hn::Add(d0, s0), d, dst + i);
    hn::StoreU(hn::Add(d1, s1), d, dst + i + lanes);
    hn::StoreU(hn::Add(d2, s2), d, dst + i + 2 * lanes);
    hn::StoreU(hn::Add(d3, s3), d, dst + i + 3 * lanes);
  }
  for (; i + lanes <= n; i += lanes) hn::StoreU(hn::Add(hn::LoadU(d, dst + i), hn::LoadU(d, src + i)), d, dst + i);
  for (; i < n; ++i) dst[i] += src[i];
}

// Row of token t on the table side.
HWY_INLINE int64_t PeRowOf(const PeRowsArgs& a, int64_t t) { return a.rows != nullptr ? a.rows[t] : a.row_offset + t; }

// Tokens [t0, t1) of one call, in increasing order.
void PeRowsImpl(const PeRowsArgs& a, int64_t t0, int64_t t1) {
  HWY_DASSERT(0 <= t0 && t0 <= t1 && t1 <= a.n_tokens);
  for (int64_t t = t0; t < t1; ++t) {
    float* tok = a.tokens + t * a.token_stride;
    float* tab = a.table + PeRowOf(a, t) * a.table_stride;
    switch (a.op) {
      case PeRowsOp::kGather:
        PeCopyRow(tok, tab, a.d_model);
        break;
      case PeRowsOp::kGatherAdd:
        PeAddRow(tok, tab, a.d_model);
        break;
      case PeRowsOp::kScatterAdd:
        PeAddRow(tab, tok, a.d_model);
        break;
    }
  }
}

// kScatterAdd restricted to table rows [r0, r1): every token whose row falls there, in increasing token order,
// so each table element receives exactly the additions of the full call, in the same order.
void PeScatterRowsImpl(const PeRowsArgs& a, int64_t r0, int64_t r1) {
  HWY_DASSERT(a.op == PeRowsOp::kScatterAdd && r0 <= r1);
  if (a.rows == nullptr) {  // row(t) = row_offset + t: the tokens of [r0, r1) are one contiguous range
    const int64_t t0 = std::max<int64_t>(r0 - a.row_offset, 0);
    const int64_t t1 = std::min<int64_t>(r1 - a.row_offset, a.n_tokens);
    if (t0 < t1) PeRowsImpl(a, t0, t1);
    return;
  }
  for (int64_t t = 0; t < a.n_tokens; ++t) {
    const int64_t row = a.rows[t];
    if (row < r0 || row >= r1) continue;
    PeAddRow(a.table + row * a.table_stride, a.tokens + t * a.token_stride, a.d_model);
  }
}

// w[i] = w[i] - lr * g[i] for i in [i0, i1): product rounded, then difference rounded (no MulAdd).
void PeSgdImpl(float* w, const float* g, int64_t i0, int64_t i1, float learning_rate) {
  const hn::ScalableTag<float> d;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto lr = hn::Set(d, learning_rate);
  int64_t i = i0;
  for (; i + 2 * lanes <= i1; i += 2 * lanes) {
    const auto p0 = hn::Mul(lr, hn::LoadU(d, g + i));
    const auto p1 = hn::Mul(lr, hn::LoadU(d, g + i + lanes));
    hn::StoreU(hn::Sub(hn::LoadU(d, w + i), p0), d, w + i);
    hn::StoreU(hn::Sub(hn::LoadU(d, w + i + lanes), p1), d, w + i + lanes);
  }
  for (; i + lanes <= i1; i += lanes) {
    hn::StoreU(hn::Sub(hn::LoadU(d, w + i), hn::Mul(lr, hn::LoadU(d, g + i))), d, w + i);
  }
  for (; i < i1; ++i) w[i] -= learning_rate * g[i];
}

int64_t PeTargetImpl() { return HWY_TARGET; }

}  // namespace HWY_NAMESPACE
}  // namespace posenc
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace posenc {
HWY_EXPORT(PeRowsImpl);
HWY_EXPORT(PeScatterRowsImpl);
HWY_EXPORT(PeSgdImpl);
HWY_EXPORT(PeTargetImpl);

namespace kernels {
namespace {

// Bytes read and written: gather reads the table row and writes the token row; the adds also read the
// destination.
int64_t MovedBytes(const PeRowsArgs& a) {
  const int64_t per_element = a.op == PeRowsOp::kGather ? 2 : 3;
  return per_element * a.n_tokens * a.d_model * static_cast<int64_t>(sizeof(float));
}

// Threads for a call moving `bytes`: 1 below kPeParallelMinBytes or inside a parallel region, else at most
// one per kPeParallelMinBytes / 2 and at most `parts` (the number of independent pieces).
int64_t ThreadsFor(int64_t bytes, int64_t parts) {
  if (bytes < kPeParallelMinBytes || omp_in_parallel()) return 1;
  return std::max<int64_t>(
      1, std::min<int64_t>({static_cast<int64_t>(omp_get_max_threads()), bytes / (kPeParallelMinBytes / 2), parts}));
}

// Work pieces of about this many bytes are handed to threads one at a time (dynamic schedule), so a thread the
// OS delays (shared machines) holds up at most one piece, not a fixed share of the call.
constexpr int64_t kBlockBytes = int64_t{256} << 10;

void RunRows(const PeRowsArgs& a) {
  const int64_t bytes = MovedBytes(a);
  if (a.op != PeRowsOp::kScatterAdd) {
    // Gathers: split by tokens; every token row is written by exactly one thread.
    const int64_t threads = ThreadsFor(bytes, a.n_tokens);
    if (threads <= 1) {
      HWY_DYNAMIC_DISPATCH(PeRowsImpl)(a, 0, a.n_tokens);
      return;
    }
    const int64_t bytes_per_token = std::max<int64_t>(bytes / a.n_tokens, 1);
    const int64_t block = std::max<int64_t>(kBlockBytes / bytes_per_token, 1);
    const int64_t n_blocks = (a.n_tokens + block - 1) / block;
    HWY_DYNAMIC_DISPATCH(PeTargetImpl)();  // initialise the dispatch target once, before the threads use it
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(threads))
    for (int64_t b = 0; b < n_blocks; ++b) {
      HWY_DYNAMIC_DISPATCH(PeRowsImpl)(a, b * block, std::min(a.n_tokens, (b + 1) * block));
    }
    return;
  }
  // Scatter-add: split by table rows, never by tokens. The piece owning rows [r0, r1) adds every token whose row
  // falls there, in token order, so each element's summation order (and hence every bit) equals the scalar
  // reference's however many positions repeat; each piece writes whole, contiguous table rows.
  int64_t lo = a.row_offset, hi = a.row_offset + a.n_tokens;  // rows touched: [lo, hi)
  if (a.rows != nullptr) {
    const auto [mn, mx] = std::minmax_element(a.rows, a.rows + a.n_tokens);
    lo = *mn;
    hi = *mx + 1;
  }
  const int64_t span = hi - lo;
  const int64_t threads = ThreadsFor(bytes, span);
  if (threads <= 1) {
    HWY_DYNAMIC_DISPATCH(PeRowsImpl)(a, 0, a.n_tokens);
    return;
  }
  // 4 pieces per thread for the dynamic schedule; with explicit rows each piece scans the n_tokens positions
  // (8 bytes each, against >= 12 * d_model bytes of row traffic per token).
  const int64_t rows_per_piece = (span + 4 * threads - 1) / (4 * threads);
  const int64_t n_pieces = (span + rows_per_piece - 1) / rows_per_piece;
  HWY_DYNAMIC_DISPATCH(PeTargetImpl)();
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(threads))
  for (int64_t p = 0; p < n_pieces; ++p) {
    const int64_t r0 = lo + p * rows_per_piece;
    HWY_DYNAMIC_DISPATCH(PeScatterRowsImpl)(a, r0, std::min(hi, r0 + rows_per_piece));
  }
}

void RunSgd(float* w, const float* g, int64_t n, float learning_rate) {
  const int64_t bytes = 3 * n * static_cast<int64_t>(sizeof(float));
  const int64_t threads = ThreadsFor(bytes, n);
  if (threads <= 1) {
    HWY_DYNAMIC_DISPATCH(PeSgdImpl)(w, g, 0, n, learning_rate);
    return;
  }
  const int64_t block = kBlockBytes / (3 * static_cast<int64_t>(sizeof(float)));  // elements per piece
  const int64_t n_blocks = (n + block - 1) / block;
  HWY_DYNAMIC_DISPATCH(PeTargetImpl)();
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast <int>(threads))
  for (int64_t b = 0; b < n_blocks; ++b) {
    HWY_DYNAMIC_DISPATCH(PeSgdImpl)(w, g, b * block, std::min(n, (b + 1) * block), learning_rate);
  }
}

constexpr int kPathUnset = -1;
std::atomic<int> g_path{kPathUnset};

int PathFromEnvironment() {
  const char* env = std::getenv("POSENC_KERNEL");
  return (env != nullptr && std::string_view(env) == "scalar") ? static_cast<int>(PeKernelPath::kScalar)
                                                               : static_cast<int>(PeKernelPath::kAuto);
}

}  // namespace

void SetPeKernelPath(PeKernelPath path) { g_path.store(static_cast<int>(path), std::memory_order_relaxed); }

PeKernelPath GetPeKernelPath() {
  int p = g_path.load(std::memory_order_relaxed);
  if (p == kPathUnset) {
    int expected = kPathUnset;
    g_path.compare_exchange_strong(expected, PathFromEnvironment(), std::memory_order_relaxed);
    p = g_path.load(std::memory_order_relaxed);
  }
  return static_cast<PeKernelPath>(p);
}

const char* PeKernelTargetName() { return hwy::TargetName(HWY_DYNAMIC_DISPATCH(PeTargetImpl)()); }

void PeRowsSimd(const PeRowsArgs& args) {
  if (args.n_tokens <= 0 || args.d_model <= 0) return;
  RunRows(args);
}

void PeRowsKernel(const PeRowsArgs& args) {
  if (GetPeKernelPath() == PeKernelPath::kScalar) {
    PeRowsScalar(args);
  } else {
    PeRowsSimd(args);
  }
}

void PeSgdSimd(float* w, const float* g, int64_t n, float learning_rate) {
  if (n <= 0) return;
  RunSgd(w, g, n, learning_rate);
}

void PeSgdKernel(float* w, const float* g, int64_t n, float learning_rate) {
  if (GetPeKernelPath() == PeKernelPath::kScalar) {
    PeSgdScalar(w, g, n, learning_rate);
  } else {
    PeSgdSimd(w, g, n, learning_rate);
  }
}

}  // namespace kernels
}  // namespace posenc
#endif  // HWY_ONCE
