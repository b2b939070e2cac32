// Causal self-attention with GQA and RoPE: the float64 layer's gradients against finite differences for every RoPE
// variant (no RoPE, interleaved, half-split, partial rotary, linear / ntk / yarn with its folded attention factor,
// dynamic with pre-rotation rows, a softmax-scale multiplier); the float32 layer (tile kernels) against the float64
// one; thread-count independence; bad input.
#include "posenc/model/layers/self_attention.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "grad_check.h"
#include "posenc/core/errors.h"
#include "rope_methods_util.h"

namespace posenc {
namespace {

using testing::BuildMethod;
using testing::MethodTables;
using testing::Uniform;

struct Variant {
  std::string method;  // "off" (no RoPE) or a BuildMethod name
  RopeLayout layout = RopeLayout::kInterleaved;
  int64_t half = 4;    // rotary pairs (head_dim 8: 4 = full rotary)
  double extra_multiplier = 1.0;
};

MethodTables Tables(const Variant& v, int64_t D, int64_t ctx) {
  if (v.method == "off") return MethodTables{};
  MethodTables m = BuildMethod(v.method, D, v.half, ctx, ctx / 2, v.layout);
  m.softmax_scale_multiplier *= v.extra_multiplier;
  return m;
}

std::string Describe(const Variant& v) {
  return v.method + " " + RopeLayoutName(v.layout) + " half " + std::to_string(v.half) + " mult " +
         std::to_string(v.extra_multiplier);
}

const Variant kVariants[] = {
    {"off"},
    {"none"},
    {"none", RopeLayout::kHalfSplit},
    {"none", RopeLayout::kHalfSplit, 2},   // partial rotary: 4 of 8 channels
    {"linear", RopeLayout::kInterleaved, 3, 1.3},
    {"ntk"},
    {"yarn"},                              // attention_factor folded into cos/sin
    {"yarn", RopeLayout::kHalfSplit},
    {"dynamic"},                           // pre-rotation rows p >= ctx / 2
};

// L = sum(wy * out) over a [2, 10] batch with 4 query heads sharing 2 kv heads of head_dim 8.
TEST(SelfAttentionTest, Float64GradientsMatchFiniteDifferencesForEveryRopeVariant) {
  const SelfAttentionShape shape{2, 10, {4, 2, 8}};
  const int64_t N = shape.batch * shape.ctx;
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(Describe(v));
    const MethodTables m = Tables(v, 8, shape.ctx);
    const AttentionRope rope = m.rope();
    std::vector<double> qkv = Uniform(N * shape.qkv_width(), 1, 1.5), wy = Uniform(N * shape.out_width(), 2);
    std::vector<double> qk(N * shape.qk_width()), out(N * shape.out_width()), lse(N * 4);
    SelfAttentionWorkspace ws;
    auto loss = [&] {
      SelfAttentionForward<double>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), ws);
      double s = 0;
      for (size_t i = 0; i < out.size(); ++i) s += wy[i] * out[i];
      return s;
    };
    loss();
    std::vector<double> d(qkv.size(), 0.0);
    SelfAttentionBackward<double>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), wy.data(), d.data(), ws);
    EXPECT_EQ(testing::CheckGradient("dqkv", loss, testing::Pointers(qkv), d, 3), "");
  }
}

// float32 (Highway tiles) against float64, normwise per tensor. The kernel tests bound every element; composed
// with RoPE (3u per rotation, twice in the backward) and the key-block unpacking (exact), every element of out,
// lse, dq, dk, dv stays within ((D + 9) S + T + 20) u of the magnitudes it sums, S = max |score| (before the
// softmax), T the longest sum; normwise over a tensor we allow 8x that relative to the tensor's norm (the
// backward chains three such sums).
TEST(SelfAttentionTest, Float32MatchesFloat64ForEveryRopeVariant) {
  const SelfAttentionShape shape{3, 37, {8, 4, 8}};  // stories260K's heads, odd length: partial key blocks
  const int64_t N = shape.batch * shape.ctx;
  for (const Variant& v : kVariants) {
    SCOPED_TRACE(Describe(v));
    const MethodTables m = Tables(v, 8, shape.ctx);
    const AttentionRope rope = m.rope();
    const std::vector<double> src = Uniform(N * shape.qkv_width(), 4, 2.0), gsrc = Uniform(N * shape.out_width(), 5);
    std::vector<float> qkv(src.begin(), src.end()), g(gsrc.begin(), gsrc.end());
    std::vector<double> qkv64(qkv.begin(), qkv.end()), g64(g.begin(), g.end());
    std::vector<float> qk(N * shape.qk_width()), out(N * shape.out_width()), lse(N * 8), d(qkv.size(), 0.0f);
    std::vector<double> qk64(qk.size()), out64(out.size()), lse64(lse.size()), d64(qkv.size(), 0.0);
    SelfAttentionWorkspace ws;
    SelfAttentionForward<float>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), ws);
    SelfAttentionBackward<float>(shape, rope, qkv.data(), qk.data(), out.data(), lse.data(), g.data(), d.data(), ws);
    SelfAttentionForward<double>(shape, rope, qkv64.data(), qk64.data(), out64.data(), lse64.data(), ws);
    SelfAttentionBackward<double>(shape, rope, qkv64.data(), qk64.data(), out64.data(), lse64.data(), g64.data(),
                                  d64.data(), ws);
    double S = 0;  // |score| <= scale |q| |k| (attention_factor^2 included through the rotated norms)
    for (int64_t t = 0; t < N; ++t) {
      for (int64_t h = 0; h < 12; ++h) {
        double n2 = 0;
        for (int64_t x = 0; x < 8; ++x) n2 += qk64[t * shape.qk_width() + h * 8 + x] * qk64[t * shape.qk_width() + h * 8 + x];
        S = std::max(S, std::sqrt(n2));
      }
    }
    S = S * S * rope.softmax_scale_multiplier / std::sqrt(8.0);
    const double rel = 8 * ((8 + 9) * S + shape.ctx + 20) * 0x1p-24;
    auto check = [&](const char* what, const auto& got, const std::vector<double>& ref) {
      double err = 0, norm = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        err += (got[i] - ref[i]) * (got[i] - ref[i]);
        norm += ref[i] * ref[i];
      }
      EXPECT_LE(std::sqrt(err), rel * std::sqrt(norm)) << what << " (relative bound " << rel << ")";
    };
    check("out", out, out64);
    check("lse", lse, lse64);
    check("qk_rot", qk, qk64);
    check("dqkv", d, d64);
  }
}

TEST(SelfAttentionTest, Float32ResultsDoNotDependOnTheThreadCount) {
  const SelfAttentionShape shape{4, 50, {8, 4, 8}};
  const int64_t N = shape.batch * shape.ctx;
  const MethodTables m = BuildMethod("dynamic", 8, 4, shape.ctx, 20);
  const std::vector<double> src = Uniform(N * shape.qkv_width(), 6), gsrc = Uniform(N * shape.out_width(), 7);
  const std::vector<float> qkv(src.begin(), src.end()), g(gsrc.begin(), gsrc.end());
  auto run = [&](int threads) {
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    SelfAttentionWorkspace ws;
    std::vector<float> qk(N * shape.qk_width()), out(N * shape.out_width()), lse(N * 8), d(qkv.size(), 0.0f);
    SelfAttentionForward<float>(shape, m.rope(), qkv.data(), qk.data(), out.data(), lse.data(), ws);
    SelfAttentionBackward<float>(shape, m.rope(), qkv.data(), qk.data(), out.data(), lse.data(), g.data(), d.data(), ws);
    omp_set_num_threads(saved);
    out.insert(out.end(), d.begin(), d.end());
    out.insert(out.end(), lse.begin(), lse.end());
    return out;
  };
  EXPECT_TRUE(run(1) == run(2));
  EXPECT_TRUE(run(1) == run(3));
}

TEST(SelfAttentionTest, BadShapesAndTablesAreErrorsNamingTheField) {
  const MethodTables m = BuildMethod("none", 8, 4, 8, 4);
  AttentionRope rope = m.rope();
  EXPECT_THROW(ValidateSelfAttention({1, 8, {6, 4, 8}}, rope), ShapeError);  // heads not a multiple of kv heads
  EXPECT_THROW(ValidateSelfAttention({1, 9, {4, 2, 8}}, rope), RangeError);  // table shorter than ctx
  EXPECT_THROW(ValidateSelfAttention({1, 8, {4, 2, 6}}, rope), ShapeError);  // rotary_dim 8 > head_dim 6
  rope.softmax_scale_multiplier = 0;
  EXPECT_THROW(ValidateSelfAttention({1, 8, {4, 2, 8}}, rope), ConfigError);
  const MethodTables dyn = BuildMethod("dynamic", 8, 4, 8, 4);
  AttentionRope half_split = dyn.rope();
  half_split.layout = RopeLayout::kHalfSplit;
  try {
    ValidateSelfAttention({1, 8, {4, 2, 8}}, half_split);
    FAIL() << "no error";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("interleaved"), std::string::npos) << e.what();
  }
  std::vector<float> buf(1000);
  SelfAttentionWorkspace ws;
  EXPECT_THROW(SelfAttentionForward<float>({1, 8, {4, 2, 8}}, m.rope(), nullptr, buf.data(), buf.data(), buf.data(), ws),
               ShapeError);
}

}  // namespace
}  // namespace posenc
