// FlashCausalAttention (tiled, online softmax, RoPE fused into the loads) against a float64 reference written
// from the definition and against CausalAttention on the same rotated inputs; its Highway kernels against their
// scalar twins on every compiled target.
//
// Tolerance (derived, per output element; u = 2^-24, first order in u):
//  * Rotation: a rotated channel x' = a c - b s is computed with 2 roundings, |dx'| <= 2u (|a c| + |b s|) =: 2u X;
//    a pass-through channel is exact (X = |x|). The scale is folded into q: fl(scale) and fl(q' * scale) add
//    2u relative. The dot product of head_dim terms adds gamma_hd <= hd u (any summation order, sgemm included).
//    So the score error is ds_j <= scale * (hd + 6) u * sum_d Xq_d Xk_jd  (=: dS_j, computed in double).
//  * Softmax weights: perturbing scores by ds changes log w_j by ds_j - sum_i w_i ds_i, so |dw_j| <= 2 max_j dS_j
//    w_j. The exp argument fl(s_j - m) carries u |s_j - m| of rounding, i.e. a relative error u |x_j| in p_j, plus
//    the exp's own 1 ulp (2u). Each key tile rescales O and l by corr (exp 1 ulp + one product): <= 6u per tile.
//  * Sums: l = sum p_j and O = sum p_j v_j each within gamma_n <= n u (n = visible keys); the final O / l: u.
//  => |out - ref| <= sum_j w_j |v_j| (2 max dS + u |x_j|) + sum_j w_j |v_j| (2 n + 6 tiles + 8) u.
// CausalAttention obeys the same bound with its exp's 2 ulp (its rotation is done by ApplyRope before the call);
// the two agree within the sum of both bounds.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "hwy/targets.h"
#include "posenc/attention/attention.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/flash_kernels.h"
#include "posenc/rope/apply.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

// cos/sin of position r for pair i: angle r * 10000^(-2i / (2 half)), in double, rounded once to float32.
CosSinTable Table(int64_t n_rows, int64_t half) {
  CosSinTable t;
  t.n_rows = n_rows;
  t.half = half;
  t.cos.resize(static_cast<size_t>(n_rows * half));
  t.sin.resize(t.cos.size());
  for (int64_t r = 0; r < n_rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(r) * std::pow(10000.0, -2.0 * i / (2.0 * half));
      t.cos[r * half + i] = static_cast<float>(std::cos(a));
      t.sin[r * half + i] = static_cast<float>(std::sin(a));
    }
  }
  return t;
}

struct Shape {
  int64_t n_heads = 8, n_kv_heads = 2, head_dim = 64;
  int64_t n_q = 0, n_k = 0, q_pos0 = 0;
  int64_t q_stride = 0, kv_stride = 0, out_stride = 0;  // 0: contiguous
  int64_t rotary_dim = 0;                               // 0: no rotation (inputs as given)
  RopeLayout layout = RopeLayout::kHalfSplit;
  float mult = 1.0f;
  float magnitude = 1.0f;  // q and k are standard normal times this
  FlashTiling tiling;

  int64_t QS() const { return q_stride ? q_stride : n_heads * head_dim; }
  int64_t KS() const { return kv_stride ? kv_stride : n_kv_heads * head_dim; }
  int64_t OS() const { return out_stride ? out_stride : n_heads * head_dim; }
};

struct Data {
  std::vector<float> q, k, v;  // unrotated, with the shape's strides
  CosSinTable table;
};

Data MakeData(const Shape& s, uint32_t seed) {
  Data d;
  d.q = testing::RandomNormal(static_cast<size_t>(s.n_q * s.QS()), seed);
  d.k = testing::RandomNormal(static_cast<size_t>(s.n_k * s.KS()), seed + 1);
  d.v = testing::RandomNormal(static_cast<size_t>(s.n_k * s.KS()), seed + 2);
  for (float& x : d.q) x *= s.magnitude;
  for (float& x : d.k) x *= s.magnitude;
  d.table = Table(std::max<int64_t>(s.n_k, 1), std::max<int64_t>(s.rotary_dim / 2, 1));
  return d;
}

// The rotated copy of one head vector in double, and X_d = |a c| + |b s| (rotated) or |x_d| (pass-through).
void RotateDouble(const Shape& s, const CosSinTable& t, const float* x, int64_t pos, std::vector<double>& r,
                  std::vector<double>& xabs) {
  const int64_t hd = s.head_dim, half = s.rotary_dim / 2;
  for (int64_t d = 0; d < hd; ++d) {
    r[d] = x[d];
    xabs[d] = std::fabs(x[d]);
  }
  for (int64_t i = 0; i < half; ++i) {
    const int64_t ia = s.layout == RopeLayout::kHalfSplit ? i : 2 * i;
    const int64_t ib = s.layout == RopeLayout::kHalfSplit ? i + half : 2 * i + 1;
    const double c = t.cos[pos * half + i], sn = t.sin[pos * half + i], a = x[ia], b = x[ib];
    r[ia] = a * c - b * sn;
    r[ib] = a * sn + b * c;
    xabs[ia] = std::fabs(a * c) + std::fabs(b * sn);
    xabs[ib] = std::fabs(a * sn) + std::fabs(b * c);
  }
}

// Float64 reference from the definition and the per-element bound of the header comment.
struct Reference {
  std::vector<double> out, tol;  // [n_q, n_heads, head_dim], contiguous
};

Reference ComputeReference(const Shape& s, const Data& d, int64_t k_block) {
  const int64_t hd = s.head_dim, kv_mul = s.n_heads / s.n_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd)) * s.mult;
  Reference ref;
  ref.out.resize(static_cast<size_t>(s.n_q * s.n_heads * hd));
  ref.tol.resize(ref.out.size());
  // Rotated keys once.
  std::vector<double> kr(static_cast<size_t>(s.n_k * s.n_kv_heads * hd)), ka(kr.size()), r(hd), ra(hd);
  for (int64_t j = 0; j < s.n_k; ++j) {
    for (int64_t g = 0; g < s.n_kv_heads; ++g) {
      RotateDouble(s, d.table, d.k.data() + j * s.KS() + g * hd, j, r, ra);
      std::copy(r.begin(), r.end(), kr.begin() + (j * s.n_kv_heads + g) * hd);
      std::copy(ra.begin(), ra.end(), ka.begin() + (j * s.n_kv_heads + g) * hd);
    }
  }
  std::vector<double> sc, ds;
  for (int64_t i = 0; i < s.n_q; ++i) {
    const int64_t p = s.q_pos0 + i, n = p + 1;
    const int64_t tiles = (n + k_block - 1) / k_block;
    for (int64_t h = 0; h < s.n_heads; ++h) {
      const int64_t g = h / kv_mul;
      RotateDouble(s, d.table, d.q.data() + i * s.QS() + h * hd, p, r, ra);
      sc.assign(static_cast<size_t>(n), 0.0);
      ds.assign(static_cast<size_t>(n), 0.0);
      double mx = -std::numeric_limits<double>::infinity(), ds_max = 0;
      for (int64_t j = 0; j < n; ++j) {
        double dot = 0, dabs = 0;
        for (int64_t c = 0; c < hd; ++c) {
          dot += r[c] * kr[(j * s.n_kv_heads + g) * hd + c];
          dabs += ra[c] * ka[(j * s.n_kv_heads + g) * hd + c];
        }
        sc[j] = dot * scale;
        ds_max = std::max(ds_max, scale * static_cast<double>(hd + 6) * kU * dabs);
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      std::vector<double> w(static_cast<size_t>(n));
      for (int64_t j = 0; j < n; ++j) sum += (w[j] = std::exp(sc[j] - mx));
      for (double& x : w) x /= sum;
      for (int64_t c = 0; c < hd; ++c) {
        double acc = 0, tol = 0;
        for (int64_t j = 0; j < n; ++j) {
          const double vj = d.v[j * s.KS() + g * hd + c];
          acc += w[j] * vj;
          tol += w[j] * std::fabs(vj) *
                 (2 * ds_max + kU * std::fabs(sc[j] - mx) + static_cast<double>(2 * n + 6 * tiles + 8) * kU);
        }
        ref.out[(i * s.n_heads + h) * hd + c] = acc;
        ref.tol[(i * s.n_heads + h) * hd + c] = tol;
      }
    }
  }
  return ref;
}

AttentionInputs Inputs(const Shape& s, const float* q, const float* k, const float* v) {
  return {q, s.n_q, s.QS(), s.q_pos0, k, v, s.n_k, s.KS()};
}

FlashRope Rope(const Shape& s, const Data& d, FlashRopeTarget target) {
  if (s.rotary_dim == 0) return {};
  return {target, View(d.table), s.layout};
}

std::vector<float> RunFlash(const Shape& s, const Data& d, FlashRopeTarget target = FlashRopeTarget::kQueriesAndKeys) {
  std::vector<float> out(static_cast<size_t>(s.n_q * s.OS()), std::numeric_limits<float>::quiet_NaN());
  FlashScratch scratch;
  FlashCausalAttention({s.n_heads, s.n_kv_heads, s.head_dim}, Inputs(s, d.q.data(), d.k.data(), d.v.data()),
                       Rope(s, d, target), s.mult, out.data(), s.OS(), scratch, s.tiling);
  return out;
}

// q and k rotated in place by ApplyRope (what CausalAttention expects).
void RotateInputs(const Shape& s, Data& d) {
  if (s.rotary_dim == 0) return;
  std::vector<int64_t> qrows(static_cast<size_t>(s.n_q)), krows(static_cast<size_t>(s.n_k));
  for (int64_t i = 0; i < s.n_q; ++i) qrows[i] = s.q_pos0 + i;
  for (int64_t j = 0; j < s.n_k; ++j) krows[j] = j;
  ApplyRope({d.q.data(), DType::kF32, s.n_q, s.n_heads, s.head_dim, s.QS(), s.head_dim}, qrows, View(d.table),
            s.layout);
  ApplyRope({d.k.data(), DType::kF32, s.n_k, s.n_kv_heads, s.head_dim, s.KS(), s.head_dim}, krows, View(d.table),
            s.layout);
}

// Checks flash against the float64 reference and CausalAttention (on pre-rotated inputs); returns the largest
// error / tolerance seen against the reference.
double CheckCase(const Shape& s, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads " << s.n_heads << "/" << s.n_kv_heads << " hd " << s.head_dim
                                    << " n_q " << s.n_q << " n_k " << s.n_k << " q_pos0 " << s.q_pos0 << " rot "
                                    << s.rotary_dim << " " << RopeLayoutName(s.layout) << " mult " << s.mult
                                    << " tiles " << s.tiling.q_block << "x" << s.tiling.k_block);
  Data d = MakeData(s, seed);
  const std::vector<float> flash = RunFlash(s, d);
  const Reference ref = ComputeReference(s, d, s.tiling.k_block);
  RotateInputs(s, d);
  std::vector<float> causal(static_cast<size_t>(s.n_q * s.OS()));
  AttentionScratch as;
  CausalAttention({s.n_heads, s.n_kv_heads, s.head_dim}, Inputs(s, d.q.data(), d.k.data(), d.v.data()), s.mult,
                  causal.data(), s.OS(), as);
  // Flash on the pre-rotated inputs without RoPE: the same contract as CausalAttention.
  Shape pre = s;
  pre.rotary_dim = 0;
  const std::vector<float> flash_pre = RunFlash(pre, d, FlashRopeTarget::kNone);
  double worst = 0;
  int64_t bad = 0;
  for (int64_t i = 0; i < s.n_q; ++i) {
    for (int64_t x = 0; x < s.n_heads * s.head_dim; ++x) {
      const double r = ref.out[i * s.n_heads * s.head_dim + x], tol = ref.tol[i * s.n_heads * s.head_dim + x];
      const double tol_pair = 2 * tol + 4 * kU * tol;  // causal's exp: 2 ulp instead of 1
      const float f = flash[i * s.OS() + x], c = causal[i * s.OS() + x], fp = flash_pre[i * s.OS() + x];
      if (!(std::fabs(f - r) <= tol) || !(std::fabs(f - c) <= tol_pair) || !(std::fabs(fp - c) <= tol_pair)) {
        if (++bad <= 5) {
          ADD_FAILURE() << "query " << i << " element " << x << ": flash " << f << " flash(no rope) " << fp
                        << " causal " << c << " float64 " << r << " tol " << tol;
        }
      }
      worst = std::max(worst, std::fabs(f - r) / tol);
    }
  }
  EXPECT_EQ(bad, 0);
  return worst;
}

TEST(FlashAttentionTest, MatchesReferenceOnOddSizesGqaAndHeadDims) {
  // (kv_mul, head_dim) pairs, two kv heads each; sizes around the default tiles and small tiles that leave
  // partial tiles everywhere (q_block 16, k_block 24 on 300 tokens: 19 item blocks, 13 key tiles).
  // 6 x 72 and 4 x 10: query heads past a multiple of four and channels past a multiple of four (the
  // four-head value pass and its remainders).
  const int64_t combos[][2] = {{1, 8}, {2, 64}, {4, 96}, {8, 128}, {6, 72}, {4, 10}};
  uint32_t seed = 10;
  for (int64_t n : {1, 7, 63, 64, 65, 129, 300}) {
    for (const auto& kc : combos) {
      for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
        Shape s;
        s.n_kv_heads = 2;
        s.n_heads = 2 * kc[0];
        s.head_dim = kc[1];
        s.n_q = s.n_k = n;
        s.rotary_dim = kc[1];
        s.layout = layout;
        if (layout == RopeLayout::kInterleaved) s.tiling = {16, 24};
        CheckCase(s, seed += 3);
      }
    }
  }
}

TEST(FlashAttentionTest, PartialRotaryBothLayouts) {
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    Shape s;
    s.n_heads = 4;
    s.n_kv_heads = 1;
    s.head_dim = 64;
    s.rotary_dim = 16;  // GPT-NeoX: 25% of the head
    s.n_q = s.n_k = 150;
    s.layout = layout;
    CheckCase(s, 101);
    s.head_dim = 96;
    s.rotary_dim = 24;
    s.tiling = {32, 40};
    CheckCase(s, 102);
  }
}

TEST(FlashAttentionTest, QueryOffsetChunkedPrefillAndDecode) {
  Shape s;
  s.n_heads = 8;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.rotary_dim = 64;
  // The last chunk of a prefill: 37 queries at positions 163..199 against 200 keys.
  s.n_q = 37;
  s.n_k = 200;
  s.q_pos0 = 163;
  CheckCase(s, 201);
  // A middle chunk: queries at 50..89; keys past 89 exist but are not visible to any query.
  s.n_q = 40;
  s.q_pos0 = 50;
  s.tiling = {16, 32};
  CheckCase(s, 202);
  // Decode: one query at position 999 against a 1000-key cache, GQA 4, head_dim 128.
  Shape dec;
  dec.n_heads = 16;
  dec.n_kv_heads = 4;
  dec.head_dim = 128;
  dec.rotary_dim = 128;
  dec.layout = RopeLayout::kInterleaved;
  dec.n_q = 1;
  dec.n_k = 1000;
  dec.q_pos0 = 999;
  CheckCase(dec, 203);
}

TEST(FlashAttentionTest, StridedInputsFromPackedQkv) {
  // q, k, v as column slices of wider rows (token strides larger than the row) and a strided output.
  Shape s;
  s.n_heads = 6;
  s.n_kv_heads = 3;
  s.head_dim = 64;
  s.rotary_dim = 32;
  s.n_q = s.n_k = 97;
  s.q_stride = 6 * 64 + 40;
  s.kv_stride = 3 * 64 + 8;
  s.out_stride = 6 * 64 + 24;
  CheckCase(s, 301);
}

TEST(FlashAttentionTest, LargeScoresStayFiniteThanksToTheRunningMax) {
  // |q.k| / sqrt(d) reaches several hundred (e^x overflows float32 past x = 88.7); k_block 32 makes later tiles
  // raise the running max, so O and l are rescaled many times.
  Shape s;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.rotary_dim = 64;
  s.n_q = s.n_k = 200;
  s.magnitude = 8.0f;
  s.tiling = {16, 32};
  Data d = MakeData(s, 401);
  const std::vector<float> out = RunFlash(s, d);
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  CheckCase(s, 401);
}

TEST(FlashAttentionTest, SoftmaxScaleMultiplier) {
  for (float mult : {0.37f, 2.5f}) {
    Shape s;
    s.n_heads = 4;
    s.n_kv_heads = 4;
    s.head_dim = 64;
    s.rotary_dim = 64;
    s.n_q = s.n_k = 130;
    s.mult = mult;
    CheckCase(s, 501);
  }
}

TEST(FlashAttentionTest, QueriesOnlyWithARotatedKeyCache) {
  // kQueriesOnly on keys rotated beforehand gives what kQueriesAndKeys gives on raw keys (both rotations are
  // ApplyRope's bits; only the key matrix's stride differs inside sgemm).
  Shape s;
  s.n_heads = 8;
  s.n_kv_heads = 2;
  s.head_dim = 128;
  s.rotary_dim = 128;
  s.n_q = 33;
  s.n_k = 300;
  s.q_pos0 = 267;
  Data d = MakeData(s, 601);
  const std::vector<float> both = RunFlash(s, d, FlashRopeTarget::kQueriesAndKeys);
  std::vector<int64_t> krows(static_cast<size_t>(s.n_k));
  for (int64_t j = 0; j < s.n_k; ++j) krows[j] = j;
  ApplyRope({d.k.data(), DType::kF32, s.n_k, s.n_kv_heads, s.head_dim, s.KS(), s.head_dim}, krows, View(d.table),
            s.layout);
  const std::vector<float> q_only = RunFlash(s, d, FlashRopeTarget::kQueriesOnly);
  const Reference ref = ComputeReference(s, MakeData(s, 601), s.tiling.k_block);
  for (size_t x = 0; x < both.size(); ++x) {
    ASSERT_LE(std::fabs(both[x] - q_only[x]), 2 * ref.tol[x]) << x;
    ASSERT_LE(std::fabs(q_only[x] - ref.out[x]), ref.tol[x]) << x;
  }
}

TEST(FlashAttentionTest, SameBitsForOneThreadAndMany) {
  // 8 heads x 64 channels x 512 tokens: 2.7e8 flops, above kFlashParallelMinFlops, so the default run threads.
  Shape s;
  s.n_heads = 8;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.rotary_dim = 64;
  s.n_q = s.n_k = 512;
  s.tiling = {32, 64};
  const Data d = MakeData(s, 701);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const std::vector<float> one = RunFlash(s, d);
  omp_set_num_threads(std::max(saved, 3));  // at least 3 threads, also on a 2-core machine
  const std::vector<float> many = RunFlash(s, d);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), many.size());
  EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0);
}

TEST(FlashAttentionTest, ScratchIsPerTileNotPerSequence) {
  // The per-thread buffers depend on the tiles only: the same after a 300-token and a 1200-token call, and
  // far below one n x n score matrix.
  Shape s;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 64;
  s.n_q = s.n_k = 300;
  Data d = MakeData(s, 801);
  FlashScratch scratch;
  std::vector<float> out(static_cast<size_t>(1200 * s.OS()));
  const AttentionDims dims{s.n_heads, s.n_kv_heads, s.head_dim};
  FlashCausalAttention(dims, Inputs(s, d.q.data(), d.k.data(), d.v.data()), {}, 1.0f, out.data(), s.OS(), scratch);
  ASSERT_GE(scratch.threads.size(), 1u);
  const size_t s_small = scratch.threads[0].s.size(), q_small = scratch.threads[0].q.size();
  s.n_q = s.n_k = 1200;
  d = MakeData(s, 802);
  FlashCausalAttention(dims, Inputs(s, d.q.data(), d.k.data(), d.v.data()), {}, 1.0f, out.data(), s.OS(), scratch);
  EXPECT_EQ(scratch.threads[0].s.size(), s_small);
  EXPECT_EQ(scratch.threads[0].q.size(), q_small);
  EXPECT_TRUE(scratch.k_rot.empty());  // no RoPE: keys read in place
  EXPECT_LT(scratch.Bytes(), int64_t{1200} * 1200 * 4);
}

TEST(FlashAttentionTest, EmptyQueryIsANoOp) {
  Shape s;
  s.n_q = 0;
  s.n_k = 5;
  Data d = MakeData(s, 901);
  float sentinel = 42.0f;
  FlashScratch scratch;
  FlashCausalAttention({8, 2, 64}, Inputs(s, d.q.data(), d.k.data(), d.v.data()), {}, 1.0f, &sentinel, 512, scratch);
  EXPECT_EQ(sentinel, 42.0f);
}

TEST(FlashAttentionTest, BadInputsNameTheFieldAndValue) {
  Shape s;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  s.n_q = s.n_k = 4;
  s.rotary_dim = 8;
  Data d = MakeData(s, 1001);
  std::vector<float> out(64);
  FlashScratch scratch;
  const AttentionDims dims{4, 2, 8};
  const AttentionInputs in = Inputs(s, d.q.data(), d.k.data(), d.v.data());
  const FlashRope rope = Rope(s, d, FlashRopeTarget::kQueriesAndKeys);
  auto expect = [&](auto fn, const char* what) {
    try {
      fn();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto call = [&](AttentionDims dm, AttentionInputs i, FlashRope r, float mult, int64_t os, FlashTiling t) {
    FlashCausalAttention(dm, i, r, mult, out.data(), os, scratch, t);
  };
  EXPECT_THROW(call({4, 3, 8}, in, rope, 1.0f, 32, {}), ShapeError);
  expect([&] { call({4, 3, 8}, in, rope, 1.0f, 32, {}); }, "n_kv_heads (3)");
  EXPECT_THROW(call({0, 2, 8}, in, rope, 1.0f, 32, {}), ShapeError);
  AttentionInputs bad = in;
  bad.q_stride = 31;
  EXPECT_THROW(call(dims, bad, rope, 1.0f, 32, {}), ShapeError);
  expect([&] { call(dims, bad, rope, 1.0f, 32, {}); }, "q_stride must be >= n_heads * head_dim = 32, got 31");
  bad = in;
  bad.kv_stride = 15;
  expect([&] { call(dims, bad, rope, 1.0f, 32, {}); }, "kv_stride must be >= n_kv_heads * head_dim = 16, got 15");
  expect([&] { call(dims, in, rope, 1.0f, 31, {}); }, "out_stride must be >= n_heads * head_dim = 32, got 31");
  bad = in;
  bad.q_pos0 = -1;
  EXPECT_THROW(call(dims, bad, rope, 1.0f, 32, {}), RangeError);
  expect([&] { call(dims, bad, rope, 1.0f, 32, {}); }, "q_pos0 must be >= 0, got -1");
  bad = in;
  bad.q_pos0 = 1;  // query 3 at position 4 needs 5 keys
  EXPECT_THROW(call(dims, bad, rope, 1.0f, 32, {}), RangeError);
  expect([&] { call(dims, bad, rope, 1.0f, 32, {}); }, "n_k = 4");
  bad = in;
  bad.v = nullptr;
  EXPECT_THROW(call(dims, bad, rope, 1.0f, 32, {}), ShapeError);
  EXPECT_THROW(call(dims, in, rope, 0.0f, 32, {}), ConfigError);
  EXPECT_THROW(call(dims, in, rope, std::numeric_limits<float>::quiet_NaN(), 32, {}), ConfigError);
  EXPECT_THROW(call(dims, in, rope, 1.0f, 32, {-1, 16}), ConfigError);
  expect([&] { call(dims, in, rope, 1.0f, 32, {-1, 16}); }, "tiling.q_block must be >= 0, got -1");
  expect([&] { call(dims, in, rope, 1.0f, 32, {16, 0}); }, "tiling.k_block must be >= 1, got 0");
  FlashRope short_table = rope;
  short_table.table.n_rows = 3;
  EXPECT_THROW(call(dims, in, short_table, 1.0f, 32, {}), RangeError);
  expect([&] { call(dims, in, short_table, 1.0f, 32, {}); }, "[0, 3)");
  FlashRope wide = rope;
  wide.table.half = 5;
  expect([&] { call(dims, in, wide, 1.0f, 32, {}); }, "rotary_dim = 2 * half = 10 must be <= head_dim = 8");
  FlashRope null_table = rope;
  null_table.table.cos = nullptr;
  EXPECT_THROW(call(dims, in, null_table, 1.0f, 32, {}), ShapeError);
  // A null output is named (both entry points share ValidateAttentionCall).
  try {
    FlashCausalAttention(dims, in, rope, 1.0f, nullptr, 32, scratch);
    ADD_FAILURE() << "no error for a null out";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("out is null for n_q = 4"), std::string::npos) << e.what();
  }
  AttentionScratch row_scratch;
  EXPECT_THROW(CausalAttention(dims, Inputs(s, d.q.data(), d.k.data(), d.v.data()), 1.0f, nullptr, 32, row_scratch),
               ShapeError);
  // Nothing was written by any failed call.
  for (float x : out) EXPECT_EQ(x, 0.0f);
}

// A key tile larger than the keys is clamped to them (no allocation of k_block floats per row): the result is
// the one of the default tiling bit for bit, since either way one tile holds all n_k keys.
TEST(FlashAttentionTest, HugeKeyBlockIsClampedToTheKeys) {
  Shape s;
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  s.n_q = s.n_k = 40;
  s.rotary_dim = 8;
  Data d = MakeData(s, 1002);
  std::vector<float> a(static_cast<size_t>(40 * 32)), b(a.size());
  FlashScratch scratch;
  const AttentionDims dims{4, 2, 8};
  const AttentionInputs in = Inputs(s, d.q.data(), d.k.data(), d.v.data());
  const FlashRope rope = Rope(s, d, FlashRopeTarget::kQueriesAndKeys);
  FlashCausalAttention(dims, in, rope, 1.0f, a.data(), 32, scratch, {16, int64_t{1} << 40});
  FlashCausalAttention(dims, in, rope, 1.0f, b.data(), 32, scratch, {16, 40});
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// GemmNN (the P V product of each tile) against float64 on strided operands: |c - ref| <= gamma_k sum |a||b|
// (k u, first order; any summation order), and with beta = 1 it adds the old c (one more rounding: + u |c|).
TEST(FlashAttentionTest, GemmNNMatchesFloat64AndAccumulates) {
  const int64_t m = 7, n = 13, k = 29, lda = 31, ldb = 17, ldc = 15;
  const std::vector<float> a = testing::RandomNormal(m * lda, 1300), b = testing::RandomNormal(k * ldb, 1301);
  std::vector<float> c0 = testing::RandomNormal(m * ldc, 1302), c = c0;
  GemmNN(m, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc, 1.0f);
  std::vector<float> c_over(static_cast<size_t>(m * ldc), std::numeric_limits<float>::quiet_NaN());
  GemmNN(m, n, k, a.data(), lda, b.data(), ldb, c_over.data(), ldc);  // beta = 0 ignores NaN in c
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) {  // past n: untouched
        EXPECT_EQ(c[i * ldc + j], c0[i * ldc + j]);
        continue;
      }
      double ref = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        ref += static_cast<double>(a[i * lda + p]) * b[p * ldb + j];
        mag += std::fabs(static_cast<double>(a[i * lda + p]) * b[p * ldb + j]);
      }
      EXPECT_LE(std::fabs(c_over[i * ldc + j] - ref), k * kU * mag) << i << " " << j;
      const double acc = ref + c0[i * ldc + j];
      EXPECT_LE(std::fabs(c[i * ldc + j] - acc), (k + 1) * kU * (mag + std::fabs(c0[i * ldc + j])) + kU * std::fabs(acc))
          << i << " " << j;
    }
  }
  EXPECT_THROW(GemmNN(m, n, k, a.data(), lda, b.data(), n - 1, c.data(), ldc), ShapeError);
  EXPECT_THROW(GemmNN(-1, n, k, a.data(), lda, b.data(), ldb, c.data(), ldc), ShapeError);
}

// ---- kernels: Highway FlashSoftmaxTile / FlashScaleRows against the scalar twins, on every target ----------

TEST(FlashKernelsTest, SoftmaxTileMatchesScalarOnEveryTarget) {
  // Two successive tiles per row (the second raises some rows' maximum, lowers others'), valid counts covering
  // 0, 1, lanes - 1, lanes + 1 and odd sizes, an unaligned row stride.
  constexpr int64_t kRows = 9, kCols = 37, kLds = 41;
  const int64_t valid[kRows] = {0, 1, 7, 9, 15, 17, 33, 36, 37};
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    SCOPED_TRACE(hwy::TargetName(target));
    hwy::SetSupportedTargetsForTest(target);
    std::vector<float> m_v(kRows, -std::numeric_limits<float>::infinity()), l_v(kRows, 0.0f), c_v(kRows);
    std::vector<float> m_s = m_v, l_s = l_v, c_s = c_v;
    for (int tile = 0; tile < 2; ++tile) {
      std::vector<float> s = testing::RandomNormal(kRows * kLds, 1100 + tile);
      for (int64_t r = 0; r < kRows; ++r) {
        for (int64_t j = 0; j < kCols; ++j) s[r * kLds + j] *= tile == 0 ? 3.0f : 3.0f + static_cast<float>(r);
      }
      std::vector<float> s_v = s, s_s = s;
      kernels::FlashSoftmaxTile(s_v.data(), kLds, kRows, kCols, valid, m_v.data(), l_v.data(), c_v.data());
      kernels::FlashSoftmaxTileScalar(s_s.data(), kLds, kRows, kCols, valid, m_s.data(), l_s.data(), c_s.data());
      for (int64_t r = 0; r < kRows; ++r) {
        EXPECT_EQ(m_v[r], m_s[r]) << r;  // max is exact
        EXPECT_EQ(c_v[r], c_s[r]) << r;  // same std::exp of the same argument
        double sum = 0;
        for (int64_t j = 0; j < kCols; ++j) {
          const float pv = s_v[r * kLds + j], ps = s_s[r * kLds + j];
          if (j >= valid[r]) {
            EXPECT_EQ(pv, 0.0f) << r << " " << j;
          } else {
            // Highway Exp 1 ulp and glibc expf < 1 ulp of the same rounded argument: at most 2 ulp apart.
            EXPECT_LE(testing::UlpDistance(pv, ps), 2) << r << " " << j;
          }
          for (int64_t j2 = kCols; j2 < kLds; ++j2) EXPECT_EQ(s_v[r * kLds + j2], s[r * kLds + j2]);  // untouched
          sum += ps;
        }
        // l: both sums within gamma_cols of the exact sum of their (2-ulp-apart) terms, plus the shared
        // l_old * corr term rounded once each: |dl| <= (2 * 2 + 2 * cols + 2) u (l_old corr + sum).
        const double bound = (2.0 * kCols + 6.0) * kU * (static_cast<double>(l_s[r]) + sum);
        EXPECT_LE(std::fabs(static_cast<double>(l_v[r]) - l_s[r]), bound) << r;
      }
      // Carry the scalar state into both, so the second tile compares like with like.
      m_v = m_s;
      l_v = l_s;
    }
    std::vector<float> o = testing::RandomNormal(5 * 23, 1200), o_s = o;
    const float f[5] = {1.0f, 0.5f, 0.0f, 0.123f, 7.0f};
    kernels::FlashScaleRows(o.data(), 23, 5, 19, f);
    for (int64_t r = 0; r < 5; ++r) {
      for (int64_t c = 0; c < 23; ++c) {
        const float want = c < 19 ? o_s[r * 23 + c] * f[r] : o_s[r * 23 + c];
        EXPECT_EQ(o[r * 23 + c], want) << r << " " << c;
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace posenc
