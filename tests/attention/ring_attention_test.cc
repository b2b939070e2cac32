// Context-parallel (ring) attention on N = 1..4 ranks simulated in this process, against the float64 definition
// and against single-process CausalAttention within the bound derived in ring_reference.h: every RoPE method of
// the eval (tables from BuildMethodRope, dynamic with pre-rotation), both layouts, GQA, contiguous and zigzag
// splits with uneven sizes. Plus exact properties: N = 1 equals FlashCausalAttention bit for bit, runs are
// deterministic, the counted work and bytes match the split's closed forms, and bad input is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "attention/ring_reference.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/attention/ring_simulation.h"
#include "posenc/core/errors.h"
#include "posenc/dist/in_process.h"
#include "posenc/model/methods.h"

namespace posenc {
namespace {

using testing::RingProblem;

std::vector<float> RunRing(const RingProblem& pr, const ContextSplit& split, const FlashTiling& tiling = {},
                           std::vector<RingStats>* stats = nullptr) {
  const int64_t q_row = pr.dims.n_heads * pr.dims.head_dim, kv_row = pr.dims.n_kv_heads * pr.dims.head_dim;
  std::vector<float> out(static_cast<size_t>(pr.n_tokens * q_row), std::numeric_limits<float>::quiet_NaN());
  SimulateRingAttention(pr.dims, split, {pr.q.data(), q_row, pr.k.data(), pr.v.data(), kv_row}, pr.rope, pr.mult,
                        out.data(), q_row, tiling, stats);
  return out;
}

// Ring on every N and split against the float64 reference and CausalAttention; returns the worst error / bound.
double CheckAllSplits(const RingProblem& pr, const FlashTiling& tiling) {
  const std::vector<float> causal = testing::SingleProcessCausal(pr);
  double worst = 0;
  for (int n = 1; n <= 4; ++n) {
    for (ContextSplitKind kind : {ContextSplitKind::kContiguous, ContextSplitKind::kZigzag}) {
      SCOPED_TRACE(::testing::Message() << "N " << n << " " << ContextSplitName(kind) << " tiles " << tiling.q_block
                                        << "x" << tiling.k_block);
      const ContextSplit split = MakeContextSplit(pr.n_tokens, n, kind);
      const std::vector<float> ring = RunRing(pr, split, tiling);
      const testing::RingCheck c =
          testing::CheckRingOutput(testing::ComputeRingReference(pr, split, tiling.k_block), ring, causal);
      EXPECT_EQ(c.bad, 0) << c.first_failure;
      worst = std::max(worst, c.worst_ratio);
    }
  }
  return worst;
}

TEST(RingAttentionTest, EveryMethodBothLayoutsGqaUnevenSplits) {
  // L = 77 tokens past L0 = 24 (factor 77/24): every method scales, and dynamic's rows p >= 24 rotate with
  // their own frequencies (pre-rotation). 77 is prime: no N or 2N divides it.
  const AttentionDims dims{4, 2, 16};
  const int64_t L = 77, L0 = 24;
  MethodOptions opts;
  RopeParams& llama3 = opts.llama3.emplace();
  llama3.rope_type = RopeType::kLlama3;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  RopeParams& longrope = opts.longrope.emplace();
  longrope.rope_type = RopeType::kLongrope;
  longrope.short_factor.assign(8, 1.0);
  longrope.long_factor = {1.0, 1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0};
  const RopeMethod methods[] = {RopeMethod::kNone,    RopeMethod::kLinear, RopeMethod::kNtk,     RopeMethod::kYarn,
                                RopeMethod::kDynamic, RopeMethod::kLlama3, RopeMethod::kLongrope};
  uint32_t seed = 100;
  double worst = 0;
  for (RopeMethod method : methods) {
    const MethodRope mr = BuildMethodRope(method, L, testing::RingTestConfig(dims, L0), opts);
    ASSERT_EQ(mr.pre_rotation() != nullptr, method == RopeMethod::kDynamic);
    for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
      SCOPED_TRACE(::testing::Message() << RopeMethodName(method) << " " << RopeLayoutName(layout));
      RingProblem pr = testing::MakeRingProblem(dims, L, seed += 3);
      pr.rope = {View(mr.table()), mr.pre_rotation(), layout};
      pr.mult = mr.softmax_scale_multiplier();
      // Default tiles (one tile per range) and small ones (q_block 5, k_block 7: partial tiles everywhere).
      worst = std::max(worst, CheckAllSplits(pr, {}));
      worst = std::max(worst, CheckAllSplits(pr, {5, 7}));
    }
  }
  RecordProperty("worst_error_over_bound", std::to_string(worst));
}

TEST(RingAttentionTest, NoRopePartialRotaryAndHeadGroupings) {
  // (n_heads, n_kv_heads, head_dim, rotary half): multi-head, GQA 4, multi-query; partial rotary (8 of 24
  // channels rotated, the rest pass through); and no RoPE at all (q, k used as given).
  const int64_t shapes[][4] = {{3, 3, 8, 4}, {8, 2, 24, 4}, {4, 1, 32, 0}};
  uint32_t seed = 500;
  for (const auto& sh : shapes) {
    const AttentionDims dims{sh[0], sh[1], sh[2]};
    const int64_t L = 53;
    RingProblem pr = testing::MakeRingProblem(dims, L, seed += 3);
    CosSinTable table;
    if (sh[3] > 0) {
      std::vector<int64_t> pos(static_cast<size_t>(L));
      for (int64_t p = 0; p < L; ++p) pos[p] = p;
      RopeFrequencies f;
      for (int64_t i = 0; i < sh[3]; ++i) f.inv_freq.push_back(std::pow(10000.0f, -static_cast<float>(i) / sh[3]));
      table = ComputeCosSin(f, pos);
      pr.rope = {View(table), nullptr, RopeLayout::kHalfSplit};
    }
    pr.mult = 1.3f;
    SCOPED_TRACE(::testing::Message() << "heads " << sh[0] << "/" << sh[1] << " hd " << sh[2] << " half " << sh[3]);
    CheckAllSplits(pr, {});
    CheckAllSplits(pr, {3, 4});
  }
}

TEST(RingAttentionTest, OneRankIsFlashAttentionBitForBit) {
  // N = 1, one range [0, L): the same items, tiles and operations as FlashCausalAttention.
  const AttentionDims dims{6, 2, 32};
  const int64_t L = 300;
  RingProblem pr = testing::MakeRingProblem(dims, L, 900);
  std::vector<int64_t> pos(static_cast<size_t>(L));
  for (int64_t p = 0; p < L; ++p) pos[p] = p;
  RopeFrequencies f;
  for (int64_t i = 0; i < 16; ++i) f.inv_freq.push_back(std::pow(10000.0f, -static_cast<float>(i) / 16));
  const CosSinTable table = ComputeCosSin(f, pos);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    pr.rope = {View(table), nullptr, layout};
    for (const FlashTiling tiling : {FlashTiling{}, FlashTiling{16, 24}}) {
      const std::vector<float> ring = RunRing(pr, MakeContextSplit(L, 1, ContextSplitKind::kContiguous), tiling);
      std::vector<float> flash(ring.size());
      FlashScratch scratch;
      FlashCausalAttention(dims, {pr.q.data(), L, 6 * 32, 0, pr.k.data(), pr.v.data(), L, 2 * 32},
                           {FlashRopeTarget::kQueriesAndKeys, View(table), layout}, 1.0f, flash.data(), 6 * 32,
                           scratch, tiling);
      for (size_t e = 0; e < ring.size(); ++e) ASSERT_EQ(ring[e], flash[e]) << "element " << e;
    }
  }
}

TEST(RingAttentionTest, DeterministicAndCountsMatchTheSplit) {
  const AttentionDims dims{4, 2, 16};
  const int64_t L = 61;
  const MethodRope mr = BuildMethodRope(RopeMethod::kDynamic, L, testing::RingTestConfig(dims, 20));
  RingProblem pr = testing::MakeRingProblem(dims, L, 1200);
  pr.rope = {View(mr.table()), mr.pre_rotation(), RopeLayout::kInterleaved};
  for (int n = 1; n <= 4; ++n) {
    const ContextSplit split = MakeContextSplit(L, n, ContextSplitKind::kZigzag);
    std::vector<RingStats> stats;
    const std::vector<float> a = RunRing(pr, split, {}, &stats);
    const std::vector<float> b = RunRing(pr, split);
    for (size_t e = 0; e < a.size(); ++e) ASSERT_EQ(a[e], b[e]) << "N " << n << " element " << e;
    const int64_t block_bytes = 2 * dims.n_kv_heads * dims.head_dim * static_cast<int64_t>(sizeof(float));
    for (int r = 0; r < n; ++r) {
      // Rank r forwards every block but the next rank's: L - Count(r + 1) positions of K and V.
      EXPECT_EQ(stats[r].bytes_sent, (L - split.Count((r + 1) % n)) * block_bytes) << "N " << n << " rank " << r;
      // Each (query head, visible key) pair attended exactly once.
      EXPECT_EQ(stats[r].pairs, split.CausalPairs(r) * dims.n_heads) << "N " << n << " rank " << r;
      EXPECT_EQ(stats[r].steps, n);
    }
  }
}

TEST(RingAttentionTest, RefusesBadInput) {
  const AttentionDims dims{4, 2, 16};
  const int64_t L = 20;
  RingProblem pr = testing::MakeRingProblem(dims, L, 1300);
  const MethodRope mr = BuildMethodRope(RopeMethod::kNone, L, testing::RingTestConfig(dims, 32));
  pr.rope = {View(mr.table()), nullptr, RopeLayout::kHalfSplit};
  const ContextSplit split = MakeContextSplit(L, 2, ContextSplitKind::kZigzag);
  // A split for 2 ranks on a group of 3.
  EXPECT_THROW(RunInProcess(3, [&](Communicator& comm) {
                 std::vector<float> out(64 * 10);
                 RingScratch s;
                 RingCausalAttention(dims, split, {pr.q.data(), 64, pr.k.data(), pr.v.data(), 32}, pr.rope, 1.0f,
                                     out.data(), 64, comm, s);
               }),
               ShapeError);
  // Ranges that miss position 5.
  ContextSplit holes = split;
  holes.ranges[0][0].end -= 1;
  EXPECT_THROW(RunRing(pr, holes), RangeError);
  // A table shorter than the window.
  RingProblem short_table = pr;
  short_table.rope.table.n_rows = L - 1;
  EXPECT_THROW(RunRing(short_table, split), RangeError);
  // Pre-rotation tables without the static table.
  const MethodRope dyn = BuildMethodRope(RopeMethod::kDynamic, L, testing::RingTestConfig(dims, 8));
  RingProblem no_table = pr;
  no_table.rope = {{}, dyn.pre_rotation(), RopeLayout::kInterleaved};
  EXPECT_THROW(RunRing(no_table, split), ShapeError);
  // A non-positive softmax-scale multiplier.
  RingProblem bad_mult = pr;
  bad_mult.mult = 0.0f;
  EXPECT_THROW(RunRing(bad_mult, split), ConfigError);
}

}  // namespace
}  // namespace posenc
