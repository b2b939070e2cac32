#include "posenc/attention/flash_attention.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <span>

#include "posenc/attention/flash_tile.h"
#include "posenc/blas/gemm.h"
#include "posenc/attention/softmax_scale.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/flash_kernels.h"
#include "posenc/rope/apply.h"

namespace posenc {
namespace {

constexpr const char* kName = "FlashCausalAttention";

void CheckInputs(const AttentionDims& dims, const AttentionInputs& in, const FlashRope& rope, const float* out,
                 int64_t out_stride, const FlashTiling& tiling) {
  ValidateAttentionDims(dims);
  if (tiling.q_block < 0) throw ConfigError(fmt::format("{}: tiling.q_block must be >= 0, got {}", kName, tiling.q_block));
  if (tiling.k_block < 1) throw ConfigError(fmt::format("{}: tiling.k_block must be >= 1, got {}", kName, tiling.k_block));
  ValidateAttentionCall(dims, in, out, out_stride, kName);
  if (in.n_q == 0) return;
  if (rope.target == FlashRopeTarget::kNone) return;
  const CosSinView& t = rope.table;
  if (t.half < 1) throw ShapeError(fmt::format("{}: rope table half (rotary_dim / 2) must be >= 1, got {}", kName, t.half));
  if (2 * t.half > dims.head_dim) {
    throw ShapeError(fmt::format("{}: rotary_dim = 2 * half = {} must be <= head_dim = {}", kName, 2 * t.half,
                                 dims.head_dim));
  }
  if (t.cos == nullptr || t.sin == nullptr) throw ShapeError(fmt::format("{}: null rope table cos/sin", kName));
  if (t.n_rows < in.n_k) {
    throw RangeError(fmt::format("{}: rope table covers positions [0, {}) but keys reach position {} (n_k = {})",
                                 kName, t.n_rows, in.n_k - 1, in.n_k));
  }
}

template <class T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// What one work item reads: the call's constants.
struct Plan {
  AttentionDims dims;
  AttentionInputs in;
  FlashRope rope;
  float scale = 0;
  int64_t kv_mul = 0;
  int64_t q_block = 0, k_block = 0;
  const float* k_base = nullptr;  // key of (token j, kv head g) at k_base + g * k_head_stride + j * k_token_stride
  int64_t k_head_stride = 0, k_token_stride = 0;
  float* out = nullptr;
  int64_t out_stride = 0;
};

// One item: kv head g, queries [i0, i0 + nb).
void RunItem(const Plan& p, int64_t g, int64_t i0, int64_t nb, FlashThreadScratch& t) {
  const int64_t hd = p.dims.head_dim, kv_mul = p.kv_mul, rows = kv_mul * nb;
  const AttentionInputs& in = p.in;
  // Queries of heads [g * kv_mul, (g + 1) * kv_mul), head-major: row hh * nb + ii is head g * kv_mul + hh,
  // query i0 + ii; rotated by their positions (unless kNone), then scaled.
  for (int64_t ii = 0; ii < nb; ++ii) t.rows[ii] = in.q_pos0 + i0 + ii;
  const CosSinView table = p.rope.target == FlashRopeTarget::kNone ? CosSinView{} : p.rope.table;
  FlashLoadQueries(in.q + i0 * in.q_stride + g * kv_mul * hd, in.q_stride, kv_mul, nb, hd, table, t.rows,
                   p.rope.layout, p.scale, t.q.data());
  const FlashRows st{rows,         hd,           p.k_block,   t.q.data(),    t.o.data(),
                     t.m.data(),   t.l.data(),   t.s.data(),  t.corr.data(), t.valid.data()};
  FlashResetRows(st);
  // Row (hh, ii) sees keys [0, position + 1); tiles past the item's last position are never visited.
  int64_t* n_visible = t.rows.data() + nb;
  for (int64_t hh = 0; hh < kv_mul; ++hh) {
    for (int64_t ii = 0; ii < nb; ++ii) n_visible[hh * nb + ii] = in.q_pos0 + i0 + ii + 1;
  }
  FlashAccumulate(st, p.k_base + g * p.k_head_stride, p.k_token_stride, in.v + g * hd, in.kv_stride, n_visible);
  FlashFinishRows(st, kv_mul, nb, p.out + i0 * p.out_stride + g * kv_mul * hd, p.out_stride);
}

}  // namespace

int64_t FlashScratch::Bytes() const {
  int64_t b = static_cast<int64_t>(k_rot.capacity() * sizeof(float) + k_rows.capacity() * sizeof(int64_t));
  for (const FlashThreadScratch& t : threads) {
    b += static_cast<int64_t>((t.q.capacity() + t.s.capacity() + t.o.capacity() + t.m.capacity() +
                               t.l.capacity() + t.corr.capacity()) * sizeof(float) +
                              (t.valid.capacity() + t.rows.capacity()) * sizeof(int64_t));
  }
  return b;
}

void FlashCausalAttention(const AttentionDims& dims, const AttentionInputs& in, const FlashRope& rope,
                          float softmax_scale_multiplier, float* out, int64_t out_stride, FlashScratch& scratch,
                          const FlashTiling& tiling) {
  CheckInputs(dims, in, rope, out, out_stride, tiling);
  const float scale = static_cast<float>(SoftmaxScale(dims.head_dim, std::nullopt, softmax_scale_multiplier));
  if (in.n_q == 0) return;
  const int64_t hd = dims.head_dim;
  Plan p;
  p.dims = dims;
  p.in = in;
  p.rope = rope;
  p.scale = scale;
  p.kv_mul = dims.n_heads / dims.n_kv_heads;
  const int64_t q_block = tiling.q_block > 0 ? tiling.q_block : std::clamp<int64_t>(256 / p.kv_mul, 16, 128);
  p.q_block = std::min(q_block, in.n_q);
  p.k_block = std::min(tiling.k_block, std::max<int64_t>(in.n_k, 1));  // a tile never exceeds the keys
  p.out = out;
  p.out_stride = out_stride;

  // Keys rotated once per call (never per tile), into [n_kv_heads, n_k, head_dim]; otherwise read in place.
  if (rope.target == FlashRopeTarget::kQueriesAndKeys) {
    Grow(scratch.k_rot, dims.n_kv_heads * in.n_k * hd);
    Grow(scratch.k_rows, in.n_k);
    for (int64_t j = 0; j < in.n_k; ++j) scratch.k_rows[j] = j;
    const HeadsView src{const_cast<float*>(in.k), DType::kF32, in.n_k, dims.n_kv_heads, hd, in.kv_stride, hd};
    const HeadsView dst{scratch.k_rot.data(), DType::kF32, in.n_k, dims.n_kv_heads, hd, hd, in.n_k * hd};
    ApplyRope(src, dst, std::span<const int64_t>(scratch.k_rows.data(), static_cast<size_t>(in.n_k)), rope.table,
              rope.layout);
    p.k_base = scratch.k_rot.data();
    p.k_head_stride = in.n_k * hd;
    p.k_token_stride = hd;
  } else {
    p.k_base = in.k;
    p.k_head_stride = hd;
    p.k_token_stride = in.kv_stride;
  }

  // Work: query blocks per kv head, ordered last block first (the causal triangle makes it the largest).
  const int64_t n_blocks = (in.n_q + p.q_block - 1) / p.q_block;
  const int64_t n_items = n_blocks * dims.n_kv_heads;
  double pairs = 0;  // (query head, key) pairs actually attended
  for (int64_t i = 0; i < in.n_q; ++i) pairs += static_cast<double>(in.q_pos0 + i + 1);
  const double flops = pairs * static_cast<double>(dims.n_heads) * 4.0 * static_cast<double>(hd);
  const int threads =
      flops > static_cast<double>(kFlashParallelMinFlops) && n_items > 1
          ? static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n_items))
          : 1;
  if (static_cast<int64_t>(scratch.threads.size()) < threads) scratch.threads.resize(static_cast<size_t>(threads));
  const int64_t max_rows = p.kv_mul * p.q_block;
  for (int t = 0; t < threads; ++t) {
    FlashThreadScratch& s = scratch.threads[t];
    Grow(s.q, max_rows * hd);
    Grow(s.o, max_rows * hd);
    Grow(s.s, max_rows * p.k_block);
    Grow(s.m, max_rows);
    Grow(s.l, max_rows);
    Grow(s.corr, max_rows);
    Grow(s.valid, max_rows);
    Grow(s.rows, p.q_block + max_rows);  // table rows, then each row's visible keys
  }
  kernels::FlashKernelTargetName();  // initialise Highway's dispatch once, before any thread uses it
  OneBlasThread one_blas_thread;
  auto run = [&](int64_t item, FlashThreadScratch& s) {
    const int64_t b = n_blocks - 1 - item / dims.n_kv_heads;
    const int64_t g = item % dims.n_kv_heads;
    const int64_t i0 = b * p.q_block;
    RunItem(p, g, i0, std::min(p.q_block, in.n_q - i0), s);
  };
  if (threads == 1) {
    for (int64_t item = 0; item < n_items; ++item) run(item, scratch.threads[0]);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    FlashThreadScratch& s = scratch.threads[omp_get_thread_num()];
#pragma omp for schedule(dynamic, 1)
    for (int64_t item = 0; item < n_items; ++item) run(item, s);
  }
}

}  // namespace posenc
