#include "posenc/attention/ring_simulation.h"

#include <algorithm>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/dist/in_process.h"

namespace posenc {

void GatherPositionRows(const std::vector<PositionRange>& ranges, const float* src, int64_t src_stride, int64_t row,
                        float* dst) {
  for (const PositionRange& r : ranges) {
    for (int64_t p = r.begin; p < r.end; ++p, dst += row) std::copy_n(src + p * src_stride, row, dst);
  }
}

void ScatterPositionRows(const std::vector<PositionRange>& ranges, const float* src, int64_t row, float* dst,
                         int64_t dst_stride) {
  for (const PositionRange& r : ranges) {
    for (int64_t p = r.begin; p < r.end; ++p, src += row) std::copy_n(src, row, dst + p * dst_stride);
  }
}

void SimulateRingAttention(const AttentionDims& dims, const ContextSplit& split, const WindowQkv& window,
                           const RingRope& rope, float softmax_scale_multiplier, float* out, int64_t out_stride,
                           const FlashTiling& tiling, std::vector<RingStats>* stats) {
  ValidateAttentionDims(dims);
  const int64_t q_row = dims.n_heads * dims.head_dim, kv_row = dims.n_kv_heads * dims.head_dim;
  if (window.q == nullptr || window.k == nullptr || window.v == nullptr || out == nullptr) {
    throw ShapeError("SimulateRingAttention: null q, k, v or out");
  }
  if (window.q_stride < q_row || window.kv_stride < kv_row || out_stride < q_row) {
    throw ShapeError(fmt::format("SimulateRingAttention: strides q {} kv {} out {} are smaller than the rows ({}, {})",
                                 window.q_stride, window.kv_stride, out_stride, q_row, kv_row));
  }
  if (stats != nullptr) stats->assign(static_cast<size_t>(split.n_ranks()), RingStats{});
  RunInProcess(split.n_ranks(), [&](Communicator& comm) {
    const int r = comm.rank();
    const std::vector<PositionRange>& mine = split.ranges[static_cast<size_t>(r)];
    const int64_t n = split.Count(r);
    std::vector<float> q(static_cast<size_t>(n * q_row)), k(static_cast<size_t>(n * kv_row)),
        v(static_cast<size_t>(n * kv_row)), o(static_cast<size_t>(n * q_row));
    GatherPositionRows(mine, window.q, window.q_stride, q_row, q.data());
    GatherPositionRows(mine, window.k, window.kv_stride, kv_row, k.data());
    GatherPositionRows(mine, window.v, window.kv_stride, kv_row, v.data());
    RingScratch scratch;
    RingStats st;
    RingCausalAttention(dims, split, {q.data(), q_row, k.data(), v.data(), kv_row}, rope, softmax_scale_multiplier,
                        o.data(), q_row, comm, scratch, tiling, &st);
    ScatterPositionRows(mine, o.data(), q_row, out, out_stride);  // each rank writes only its own rows
    if (stats != nullptr) (*stats)[static_cast<size_t>(r)] = st;
  });
}

}  // namespace posenc
