#include "posenc/attention/ring_attention.h"

#include <algorithm>
#include <chrono>
#include <span>

#include <fmt/format.h>

#include "posenc/attention/flash_tile.h"
#include "posenc/blas/gemm.h"
#include "posenc/attention/softmax_scale.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/rope/apply.h"

namespace posenc {
namespace {

constexpr const char* kName = "RingCausalAttention";

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

template <class T>
void Grow(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

void CheckSplit(const ContextSplit& split, int n_ranks) {
  if (split.n_ranks() != n_ranks) {
    throw ShapeError(fmt::format("{}: the split is for {} ranks, the communicator has {}", kName, split.n_ranks(),
                                 n_ranks));
  }
  std::vector<PositionRange> all;
  for (int r = 0; r < n_ranks; ++r) {
    const std::vector<PositionRange>& mine = split.ranges[static_cast<size_t>(r)];
    for (size_t i = 0; i < mine.size(); ++i) {
      if (mine[i].size() < 1 || (i > 0 && mine[i].begin < mine[i - 1].end)) {
        throw RangeError(fmt::format("{}: rank {} range {} [{}, {}) is empty or not ascending", kName, r, i,
                                     mine[i].begin, mine[i].end));
      }
      all.push_back(mine[i]);
    }
  }
  std::sort(all.begin(), all.end(), [](const PositionRange& a, const PositionRange& b) { return a.begin < b.begin; });
  int64_t next = 0;
  for (const PositionRange& x : all) {
    if (x.begin != next) {
      throw RangeError(fmt::format("{}: the split's ranges do not partition [0, {}): position {} is {}", kName,
                                   split.n_tokens, std::min(x.begin, next),
                                   x.begin > next ? "missing" : "held twice"));
    }
    next = x.end;
  }
  if (next != split.n_tokens) {
    throw RangeError(fmt::format("{}: the split's ranges end at {}, the window has {} tokens", kName, next,
                                 split.n_tokens));
  }
}

void CheckInputs(const AttentionDims& dims, const ContextSplit& split, const RingAttentionInputs& in,
                 const RingRope& rope, const float* out, int64_t out_stride, const Communicator& comm,
                 const FlashTiling& tiling) {
  ValidateAttentionDims(dims);
  if (tiling.q_block < 0) throw ConfigError(fmt::format("{}: tiling.q_block must be >= 0, got {}", kName, tiling.q_block));
  if (tiling.k_block < 1) throw ConfigError(fmt::format("{}: tiling.k_block must be >= 1, got {}", kName, tiling.k_block));
  CheckSplit(split, comm.size());
  const int64_t n_local = split.Count(comm.rank());
  const int64_t q_row = dims.n_heads * dims.head_dim, kv_row = dims.n_kv_heads * dims.head_dim;
  if (n_local > 0) {
    for (const auto& [ptr, what] : {std::pair<const float*, const char*>{in.q, "q"}, {in.k, "k"}, {in.v, "v"},
                                    {out, "out"}}) {
      if (ptr == nullptr) throw ShapeError(fmt::format("{}: {} is null for {} local tokens", kName, what, n_local));
    }
  }
  if (in.q_stride < q_row) {
    throw ShapeError(fmt::format("{}: q_stride must be >= n_heads * head_dim = {}, got {}", kName, q_row, in.q_stride));
  }
  if (in.kv_stride < kv_row) {
    throw ShapeError(fmt::format("{}: kv_stride must be >= n_kv_heads * head_dim = {}, got {}", kName, kv_row,
                                 in.kv_stride));
  }
  if (out_stride < q_row) {
    throw ShapeError(fmt::format("{}: out_stride must be >= n_heads * head_dim = {}, got {}", kName, q_row, out_stride));
  }
  const CosSinView& t = rope.table;
  if (t.cos == nullptr) {
    if (rope.pre_rotation != nullptr) throw ShapeError(fmt::format("{}: pre_rotation needs rope.table", kName));
    return;
  }
  if (t.sin == nullptr) throw ShapeError(fmt::format("{}: rope.table.sin is null", kName));
  if (t.half < 1) throw ShapeError(fmt::format("{}: rope table half (rotary_dim / 2) must be >= 1, got {}", kName, t.half));
  if (2 * t.half > dims.head_dim) {
    throw ShapeError(fmt::format("{}: rotary_dim = 2 * half = {} must be <= head_dim = {}", kName, 2 * t.half,
                                 dims.head_dim));
  }
  if (t.n_rows < split.n_tokens) {
    throw RangeError(fmt::format("{}: rope table covers positions [0, {}) but the window has {} tokens", kName,
                                 t.n_rows, split.n_tokens));
  }
  if (const PreRotationTables* pre = rope.pre_rotation) {
    if (pre->half() != t.half) {
      throw ShapeError(fmt::format("{}: pre_rotation half {} differs from the table's {}", kName, pre->half(), t.half));
    }
    if (pre->n_rows() < split.n_tokens) {
      throw RangeError(fmt::format("{}: pre_rotation covers query rows [0, {}) but the window has {} tokens", kName,
                                   pre->n_rows(), split.n_tokens));
    }
  }
}

// One work item: kv head g, local queries [i0, i0 + nb) at global positions [pos0, pos0 + nb), one range.
struct Item {
  int64_t g = 0, i0 = 0, nb = 0, pos0 = 0;
  bool own = false;     // a pre-rotation row with its own table (nb = 1)
  int64_t row0 = 0;     // first state row (item-major state: kv_mul * nb rows)
};

// Global positions of the tokens a rank holds, in local order.
std::vector<int64_t> Positions(const std::vector<PositionRange>& ranges) {
  std::vector<int64_t> p;
  for (const PositionRange& r : ranges) {
    for (int64_t x = r.begin; x < r.end; ++x) p.push_back(x);
  }
  return p;
}

// Copies one pre-rotation row's cos/sin of j theta_p, j in [j0, j0 + n), into a [n, half] table.
void OwnRowTable(const PreRotationTables& pre, int64_t p, int64_t j0, int64_t n, CosSinTable& t) {
  const int64_t half = pre.half();
  t.half = half;
  t.n_rows = n;
  Grow(t.cos, n * half);
  Grow(t.sin, n * half);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < half; ++i) {
      t.cos[static_cast<size_t>(j * half + i)] = pre.at(p, 0, i, j0 + j);
      t.sin[static_cast<size_t>(j * half + i)] = pre.at(p, 1, i, j0 + j);
    }
  }
}

class RingRun {
 public:
  RingRun(const AttentionDims& dims, const ContextSplit& split, const RingAttentionInputs& in, const RingRope& rope,
          float scale, Communicator& comm, RingScratch& scratch, const FlashTiling& tiling)
      : dims_(dims), split_(split), in_(in), rope_(rope), scale_(scale), comm_(comm), sc_(scratch),
        rank_(comm.rank()), n_ranks_(comm.size()), hd_(dims.head_dim), kv_mul_(dims.n_heads / dims.n_kv_heads),
        kv_row_(dims.n_kv_heads * dims.head_dim), positions_(Positions(split.ranges[static_cast<size_t>(rank_)])) {
    const int64_t n_local = static_cast<int64_t>(positions_.size());
    const int64_t q_block = tiling.q_block > 0 ? tiling.q_block : std::clamp<int64_t>(256 / kv_mul_, 16, 128);
    q_block_ = std::max<int64_t>(1, std::min(q_block, n_local));
    k_block_ = std::min(tiling.k_block, split.MaxCount());  // a tile never exceeds a block
    PlanItems();
    const int64_t max_rows = kv_mul_ * q_block_;
    Grow(sc_.q, n_local * dims.n_heads * hd_);
    Grow(sc_.o, n_local * dims.n_heads * hd_);
    Grow(sc_.m, n_local * dims.n_heads);
    Grow(sc_.l, n_local * dims.n_heads);
    Grow(sc_.s, max_rows * k_block_);
    Grow(sc_.corr, max_rows);
    Grow(sc_.valid, max_rows);
    Grow(sc_.n_visible, max_rows);
    Grow(sc_.rows, std::max(q_block_, split.MaxCount()));
    for (std::vector<float>& b : sc_.block) Grow(b, 2 * split.MaxCount() * kv_row_);
    if (rope_.pre_rotation != nullptr) {
      Grow(sc_.k_static, split.MaxCount() * kv_row_);
      Grow(sc_.k_row, split.MaxCount() * hd_);
    }
  }

  void Run(float* out, int64_t out_stride, RingStats& stats) {
    LoadQueries();
    PackOwnBlock();
    int cur = 0;
    for (int step = 0; step < n_ranks_; ++step) {
      const int src = (rank_ - step + n_ranks_) % n_ranks_;  // whose block is in hand
      const bool send = step + 1 < n_ranks_;
      if (send) {
        const int next_src = (src - 1 + n_ranks_) % n_ranks_;  // the block that arrives: the previous rank's
        const std::span<const float> mine(sc_.block[cur].data(), static_cast<size_t>(BlockFloats(src)));
        const std::span<float> incoming(sc_.block[1 - cur].data(), static_cast<size_t>(BlockFloats(next_src)));
        comm_.StartExchange(std::as_bytes(mine), (rank_ + 1) % n_ranks_, std::as_writable_bytes(incoming),
                            (rank_ - 1 + n_ranks_) % n_ranks_);
        stats.bytes_sent += static_cast<int64_t>(mine.size_bytes());
      }
      const Clock::time_point t0 = Clock::now();
      MergeBlock(src, sc_.block[cur].data(), stats);
      const Clock::time_point t1 = Clock::now();
      stats.compute_s += Seconds(t0, t1);
      if (send) {
        comm_.FinishExchange();
        stats.wait_s += Seconds(t1, Clock::now());
        cur = 1 - cur;
      }
      ++stats.steps;
    }
    for (const Item& it : items_) {
      FlashFinishRows(State(it), kv_mul_, it.nb, out + it.i0 * out_stride + it.g * kv_mul_ * hd_, out_stride);
    }
  }

 private:
  int64_t BlockFloats(int rank) const { return 2 * split_.Count(rank) * kv_row_; }

  void PlanItems() {
    const PreRotationTables* pre = rope_.pre_rotation;
    int64_t i = 0, row = 0;
    for (const PositionRange& r : split_.ranges[static_cast<size_t>(rank_)]) {
      for (int64_t p = r.begin; p < r.end;) {
        const bool own = pre != nullptr && !pre->shared(p);
        int64_t nb = 1;
        while (!own && nb < q_block_ && p + nb < r.end && (pre == nullptr || pre->shared(p + nb))) ++nb;
        for (int64_t g = 0; g < dims_.n_kv_heads; ++g) {
          items_.push_back({g, i, nb, p, own, row});
          row += kv_mul_ * nb;
        }
        p += nb;
        i += nb;
      }
    }
  }

  FlashRows State(const Item& it) {
    return {kv_mul_ * it.nb,        hd_,           k_block_,          sc_.q.data() + it.row0 * hd_,
            sc_.o.data() + it.row0 * hd_, sc_.m.data() + it.row0, sc_.l.data() + it.row0, sc_.s.data(),
            sc_.corr.data(),        sc_.valid.data()};
  }

  // Rotated (by global position, or a pre-rotation row's own angle), scaled queries into the item-major state.
  void LoadQueries() {
    for (const Item& it : items_) {
      float* q = sc_.q.data() + it.row0 * hd_;
      const float* src = in_.q + it.i0 * in_.q_stride + it.g * kv_mul_ * hd_;
      if (it.own) {
        OwnRowTable(*rope_.pre_rotation, it.pos0, it.pos0, 1, sc_.row_table);
        sc_.rows[0] = 0;
        FlashLoadQueries(src, in_.q_stride, kv_mul_, 1, hd_, View(sc_.row_table), sc_.rows, rope_.layout, scale_, q);
      } else {
        for (int64_t ii = 0; ii < it.nb; ++ii) sc_.rows[ii] = it.pos0 + ii;
        FlashLoadQueries(src, in_.q_stride, kv_mul_, it.nb, hd_, rope_.table, sc_.rows, rope_.layout, scale_, q);
      }
      FlashResetRows(State(it));
    }
  }

  // This rank's block: K (rotated by global position unless pre-rotation or no RoPE) then V, [2, n_local, kv_row].
  void PackOwnBlock() {
    const int64_t n = static_cast<int64_t>(positions_.size());
    float* k = sc_.block[0].data();
    float* v = k + n * kv_row_;
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(in_.k + i * in_.kv_stride, kv_row_, k + i * kv_row_);
      std::copy_n(in_.v + i * in_.kv_stride, kv_row_, v + i * kv_row_);
    }
    if (rope_.table.cos != nullptr && rope_.pre_rotation == nullptr && n > 0) {
      ApplyRope(HeadsView::Contiguous(k, n, dims_.n_kv_heads, hd_), positions_, rope_.table, rope_.layout);
    }
  }

  // Merges the block of rank `src` (K then V, its positions in ascending order) into every item's state.
  void MergeBlock(int src, const float* block, RingStats& stats) {
    const std::vector<PositionRange>& ranges = split_.ranges[static_cast<size_t>(src)];
    const int64_t n_src = split_.Count(src);
    const float* k = block;
    const float* v = block + n_src * kv_row_;
    const float* k_shared = k;  // keys as the shared (static) rows see them
    if (rope_.pre_rotation != nullptr && HasSharedItems()) {
      // Keys travel unrotated for pre-rotation; the static rows need them rotated by their global positions.
      const std::vector<int64_t> pos = Positions(ranges);
      std::copy_n(k, n_src * kv_row_, sc_.k_static.data());
      ApplyRope(HeadsView::Contiguous(sc_.k_static.data(), n_src, dims_.n_kv_heads, hd_), pos, rope_.table,
                rope_.layout);
      k_shared = sc_.k_static.data();
    }
    for (size_t x = 0; x < items_.size();) {
      const Item& it = items_[x];
      if (it.own) {  // every kv head of this query row: one table per key range
        MergeOwnRow(x, ranges, k, v, stats);
        x += static_cast<size_t>(dims_.n_kv_heads);
        comm_.Progress();
        continue;
      }
      const FlashRows st = State(it);
      int64_t local = 0;  // first local index of the range in the block
      for (const PositionRange& r : ranges) {
        const int64_t last = it.pos0 + it.nb - 1;
        if (r.begin <= last) {
          for (int64_t hh = 0; hh < kv_mul_; ++hh) {
            for (int64_t ii = 0; ii < it.nb; ++ii) {
              sc_.n_visible[hh * it.nb + ii] = std::clamp<int64_t>(it.pos0 + ii + 1 - r.begin, 0, r.size());
            }
          }
          for (int64_t ii = 0; ii < it.nb; ++ii) stats.pairs += kv_mul_ * sc_.n_visible[ii];
          FlashAccumulate(st, k_shared + local * kv_row_ + it.g * hd_, kv_row_, v + local * kv_row_ + it.g * hd_,
                          kv_row_, sc_.n_visible.data());
        }
        local += r.size();
      }
      ++x;
      comm_.Progress();
    }
  }

  bool HasSharedItems() const {
    return std::any_of(items_.begin(), items_.end(), [](const Item& it) { return !it.own; });
  }

  // Items [x, x + n_kv_heads): one pre-rotation query row (position p), all kv heads. Keys j of each visible
  // range are rotated by row p's own cos/sin of j theta_p, then merged.
  void MergeOwnRow(size_t x, const std::vector<PositionRange>& ranges, const float* k, const float* v,
                   RingStats& stats) {
    const int64_t p = items_[x].pos0;
    int64_t local = 0;
    for (const PositionRange& r : ranges) {
      const int64_t n_vis = std::clamp<int64_t>(p + 1 - r.begin, 0, r.size());
      if (n_vis > 0) {
        OwnRowTable(*rope_.pre_rotation, p, r.begin, n_vis, sc_.row_table);
        for (int64_t j = 0; j < n_vis; ++j) sc_.rows[j] = j;
        const std::span<const int64_t> rows(sc_.rows.data(), static_cast<size_t>(n_vis));
        std::fill_n(sc_.n_visible.data(), kv_mul_, n_vis);
        for (int64_t g = 0; g < dims_.n_kv_heads; ++g) {
          const Item& it = items_[x + static_cast<size_t>(g)];
          const HeadsView src{const_cast<float*>(k + local * kv_row_ + g * hd_), DType::kF32, n_vis, 1, hd_,
                              kv_row_, hd_};
          const HeadsView dst{sc_.k_row.data(), DType::kF32, n_vis, 1, hd_, hd_, hd_};
          ApplyRope(src, dst, rows, View(sc_.row_table), rope_.layout);
          FlashAccumulate(State(it), sc_.k_row.data(), hd_, v + local * kv_row_ + g * hd_, kv_row_,
                          sc_.n_visible.data());
          stats.pairs += kv_mul_ * n_vis;
        }
      }
      local += r.size();
    }
  }

  const AttentionDims dims_;
  const ContextSplit& split_;
  const RingAttentionInputs in_;
  const RingRope rope_;
  const float scale_;
  Communicator& comm_;
  RingScratch& sc_;
  const int rank_, n_ranks_;
  const int64_t hd_, kv_mul_, kv_row_;
  const std::vector<int64_t> positions_;  // [n_local]: global position of each local token
  int64_t q_block_ = 1, k_block_ = 1;
  std::vector<Item> items_;
};

}  // namespace

void RingCausalAttention(const AttentionDims& dims, const ContextSplit& split, const RingAttentionInputs& in,
                         const RingRope& rope, float softmax_scale_multiplier, float* out, int64_t out_stride,
                         Communicator& comm, RingScratch& scratch, const FlashTiling& tiling, RingStats* stats) {
  const Clock::time_point start = Clock::now();
  CheckInputs(dims, split, in, rope, out, out_stride, comm, tiling);
  const float scale = static_cast<float>(SoftmaxScale(dims.head_dim, std::nullopt, softmax_scale_multiplier));
  OneBlasThread one_blas_thread;
  RingStats local;
  RingRun run(dims, split, in, rope, scale, comm, scratch, tiling);
  run.Run(out, out_stride, local);
  local.total_s = Seconds(start, Clock::now());
  if (stats != nullptr) *stats = local;
}

}  // namespace posenc
