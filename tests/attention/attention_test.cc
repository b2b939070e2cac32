// Causal attention (static and pre-rotation) against a float64 reference written from the definition,
// on odd sizes, GQA groupings, strided inputs and head sizes with and without a specialised kernel.
#include <gtest/gtest.h>

#include <bit>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <random>
#include <vector>

#include "hwy/targets.h"
#include "posenc/attention/attention.h"
#include "posenc/kernels/key_blocks.h"
#include "posenc/kernels/exp_kernel.h"
#include "posenc/kernels/attention_kernels.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) { return testing::RandomNormal(n, seed); }

struct Case {
  int64_t n_heads, n_kv_heads, head_dim, n_k, q_pos0, n_q;
};

// Per query row p: key j's score uses angle(p, j, i) for pair i of q and k (0 = no rotation at all) and
// q's angle(p, p, i). Interleaved pairs; channels >= 2 * half unrotated. Everything in double.
template <typename AngleFn>
std::vector<double> Reference(const Case& c, const std::vector<float>& q, int64_t q_stride,
                              const std::vector<float>& k, const std::vector<float>& v, int64_t kv_stride,
                              int64_t half, double mult, AngleFn angle) {
  const int64_t hd = c.head_dim, kv_mul = c.n_heads / c.n_kv_heads;
  std::vector<double> out(static_cast<size_t>(c.n_q * c.n_heads * hd));
  auto rotate = [&](const float* x, int64_t p, int64_t j, std::vector<double>& r) {
    for (int64_t d = 0; d < hd; ++d) r[d] = x[d];
    for (int64_t i = 0; i < half; ++i) {
      const double a = angle(p, j, i);
      r[2 * i] = x[2 * i] * std::cos(a) - x[2 * i + 1] * std::sin(a);
      r[2 * i + 1] = x[2 * i] * std::sin(a) + x[2 * i + 1] * std::cos(a);
    }
  };
  std::vector<double> qr(hd), kr(hd);
  for (int64_t i = 0; i < c.n_q; ++i) {
    const int64_t p = c.q_pos0 + i;
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const int64_t g = h / kv_mul;
      rotate(q.data() + i * q_stride + h * hd, p, p, qr);
      std::vector<double> s(static_cast<size_t>(p + 1));
      double m = -1e300;
      for (int64_t j = 0; j <= p; ++j) {
        rotate(k.data() + j * kv_stride + g * hd, p, j, kr);
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += qr[d] * kr[d];
        s[j] = dot / std::sqrt(double(hd)) * mult;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j <= p; ++j) acc += s[j] * v[j * kv_stride + g * hd + d];
        out[(i * c.n_heads + h) * hd + d] = acc / sum;
      }
    }
  }
  return out;
}

// float32 scores and sums over <= 64 keys of O(1) terms: error <~ 64 * 2^-24 * |terms| plus 2 ulp per exp;
// 2e-5 absolute bounds it with margin for outputs of magnitude ~1.
constexpr double kTol = 2e-5;

TEST(AttentionTest, MatchesFloat64ReferenceOnOddShapes) {
  const Case cases[] = {
      {8, 4, 8, 37, 0, 37},  // stories260K heads, prefill of an odd length (partial key block)
      {8, 4, 8, 9, 8, 1},    // one decode step at position 8 (keys 0..8)
      {4, 1, 12, 21, 0, 21}, // head_dim not a multiple of 8 (generic kernel), 4 query heads per kv head
      {2, 2, 16, 64, 0, 64}, // head_dim 16, no GQA, full blocks only
      {6, 3, 8, 1, 0, 1},    // a single token
      {8, 2, 8, 40, 30, 10}, // a chunk of queries at positions 30..39
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << "heads " << c.n_heads << "/" << c.n_kv_heads << " hd " << c.head_dim
                                      << " n_k " << c.n_k << " q_pos0 " << c.q_pos0);
    // q is a slice of a wider buffer (stride > row) as when q, k, v are packed together.
    const int64_t q_stride = c.n_heads * c.head_dim + 5, kv_stride = c.n_kv_heads * c.head_dim + 3;
    const std::vector<float> q = Random(static_cast<size_t>(c.n_q * q_stride), seed++);
    const std::vector<float> k = Random(static_cast<size_t>(c.n_k * kv_stride), seed++);
    const std::vector<float> v = Random(static_cast<size_t>(c.n_k * kv_stride), seed++);
    const AttentionDims dims{c.n_heads, c.n_kv_heads, c.head_dim};
    AttentionInputs in{q.data(), c.n_q, q_stride, c.q_pos0, k.data(), v.data(), c.n_k, kv_stride};
    std::vector<float> out(static_cast<size_t>(c.n_q * c.n_heads * c.head_dim));
    AttentionScratch scratch;
    CausalAttention(dims, in, 1.25f, out.data(), c.n_heads * c.head_dim, scratch);
    const std::vector<double> ref =
        Reference(c, q, q_stride, k, v, kv_stride, 0, 1.25, [](int64_t, int64_t, int64_t) { return 0.0; });
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], kTol) << "element " << i;
  }
}

TEST(AttentionTest, PreRotationMatchesFloat64Reference) {
  // Dynamic NTK with L0 = 16: rows p >= 16 have their own base, rows below share the plain table.
  for (int64_t hd : {8, 12}) {  // 12: rotary_dim 8 of head_dim 12 (partial rotary, generic kernel)
    SCOPED_TRACE(::testing::Message() << "head_dim " << hd);
    RopeParams params;
    params.rope_type = RopeType::kDynamic;
    params.head_dim = hd;
    params.rotary_dim = 8;
    params.factor = 1.0;
    params.max_position_embeddings = 16;
    const Case c{4, 2, hd, 41, 0, 41};
    std::vector<RopeFrequencies> rows;
    for (int64_t p = 0; p < c.n_k; ++p) rows.push_back(ComputeRopeFrequencies(params, p + 1));
    const RopeFrequencies base = ComputeRopeFrequencies(params, 1);
    const PreRotationTables tables = PreRotationTables::Build(rows, base);
    EXPECT_TRUE(tables.shared(15));
    EXPECT_FALSE(tables.shared(16));
    std::vector<int64_t> pos(static_cast<size_t>(c.n_k));
    for (int64_t p = 0; p < c.n_k; ++p) pos[p] = p;
    const CosSinTable table = ComputeCosSin(base, pos);

    const int64_t q_row = c.n_heads * hd, kv_row = c.n_kv_heads * hd;
    const std::vector<float> q = Random(static_cast<size_t>(c.n_q * q_row), 11);
    const std::vector<float> k = Random(static_cast<size_t>(c.n_k * kv_row), 12);
    const std::vector<float> v = Random(static_cast<size_t>(c.n_k * kv_row), 13);
    // Statically rotated copies for the shared rows, rotated here in double from the same float32 table.
    std::vector<float> qs = q, ks = k;
    auto rot = [&](std::vector<float>& x, int64_t heads) {
      for (int64_t t = 0; t < c.n_k; ++t) {
        for (int64_t h = 0; h < heads; ++h) {
          float* e = x.data() + (t * heads + h) * hd;
          for (int64_t i = 0; i < 4; ++i) {
            const double cs = table.cos[t * 4 + i], sn = table.sin[t * 4 + i];
            const double a = e[2 * i], b = e[2 * i + 1];
            e[2 * i] = static_cast<float>(a * cs - b * sn);
            e[2 * i + 1] = static_cast<float>(a * sn + b * cs);
          }
        }
      }
    };
    rot(qs, c.n_heads);
    rot(ks, c.n_kv_heads);
    const AttentionDims dims{c.n_heads, c.n_kv_heads, hd};
    AttentionInputs rotated{qs.data(), c.n_q, q_row, 0, ks.data(), v.data(), c.n_k, kv_row};
    AttentionInputs raw{q.data(), c.n_q, q_row, 0, k.data(), v.data(), c.n_k, kv_row};
    std::vector<float> out(static_cast<size_t>(c.n_q * q_row));
    AttentionScratch scratch;
    CausalAttentionPreRotation(dims, rotated, raw, tables, 1.0f, out.data(), q_row, scratch);
    // Reference angles in double from each row's float32 inv_freq: row p turns key j by j * inv_freq_p.
    const std::vector<double> ref = Reference(c, q, q_row, k, v, kv_row, 4, 1.0, [&](int64_t p, int64_t j, int64_t i) {
      return double(j) * double(rows[static_cast<size_t>(p)].inv_freq[static_cast<size_t>(i)]);
    });
    // Extra error: float32 cos/sin (1 ulp) of angles up to 40 rad: ~1e-7 per rotated channel.
    for (size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], ref[i], kTol) << "element " << i;
  }
}

TEST(AttentionTest, RejectsInconsistentInputs) {
  const std::vector<float> x(64, 0.5f);
  std::vector<float> out(64);
  AttentionScratch scratch;
  AttentionInputs in{x.data(), 2, 16, 0, x.data(), x.data(), 2, 8};
  EXPECT_THROW(CausalAttention({2, 3, 8}, in, 1.0f, out.data(), 16, scratch), ShapeError);  // 2 % 3 != 0
  EXPECT_THROW(CausalAttention({2, 1, 0}, in, 1.0f, out.data(), 16, scratch), ShapeError);  // head_dim 0
  AttentionInputs narrow = in;
  narrow.q_stride = 15;
  EXPECT_THROW(CausalAttention({2, 1, 8}, narrow, 1.0f, out.data(), 16, scratch), ShapeError);
  AttentionInputs future = in;
  future.q_pos0 = 1;  // query at position 2 needs 3 keys, only 2 given
  EXPECT_THROW(CausalAttention({2, 1, 8}, future, 1.0f, out.data(), 16, scratch), RangeError);
  EXPECT_THROW(CausalAttention({2, 1, 8}, in, 0.0f, out.data(), 16, scratch), ConfigError);  // multiplier 0
}

TEST(AttentionTest, ExpF32IsWithinTwoUlp) {
  for (double x = -87.0; x <= 88.0; x += 0.0137) {
    const float xf = static_cast<float>(x);
    const float want = static_cast<float>(std::exp(static_cast<double>(xf)));
    ASSERT_LE(testing::UlpDistance(ExpF32(xf), want), 2) << "x = " << xf;
  }
  EXPECT_EQ(ExpF32(0.0f), 1.0f);
}

// ---- The Highway tile kernel against its scalar reference, once per Highway target this CPU runs -----------

struct TileCase {
  int64_t kv_mul, head_dim, pos0, n_rows;
  bool pre_rotation;
  int64_t n_groups = 1;
};

// Bound on |AttendTile - AttendTileScalar| for one output channel of one head-row with keys [0, n), from
// float32 rounding (u = 2^-24):
//   scores: both sum hd products (sequential vs fused/tree order) and scale them (q * scale * log2 e vs
//     (q . k) * scale): each score is within (hd + 3) u S_j of the exact one, S_j = scale * sum_d |q_d k_j,d|
//     (with pre-rotation add 3 u S_j for the key rotation, rounded differently); so two scores differ by at most
//     2 (hd + 6) u S, S = max_j S_j, and the softmax weights w_j (a shift of all scores cancels) by a relative
//     2 * 2 (hd + 6) u S;
//   exponentials: ExpF32 2 ulp and Exp2 2 ulp plus the rounding of the base-2 argument (|t - m| u): relative
//     (8 + 2 |s - m|_max) u;
//   sums of n terms (weights, weighted values) in different orders, online rescaling included: (2 n + 8) u.
// So |diff| <= W (4 (hd + 6) S + 8 + 2 D + 2 n + 8) u + 4 u |out|, W = sum_j w_j |v_j,d|, D = max |s - m|.
// A bound, not an estimate: observed differences are 10-100x smaller.
double TileBound(const std::vector<double>& w, const std::vector<double>& s, const float* vcol, int64_t n, int64_t hd,
                 double smax_abs, double out) {
  constexpr double u = 0x1p-24;
  double W = 0, D = 0;
  const double m = *std::max_element(s.begin(), s.end());
  for (int64_t j = 0; j < n; ++j) {
    W += w[static_cast<size_t>(j)] * std::fabs(vcol[(j / 8) * hd * 8 + j % 8]);
    D = std::max(D, m - s[static_cast<size_t>(j)]);
  }
  return W * (4.0 * double(hd + 6) * smax_abs + 8 + 2 * D + 2.0 * double(n) + 8) * u + 4 * u * std::fabs(out);
}

TEST(AttendTileTest, MatchesScalarReferenceOnEveryTarget) {
  const TileCase cases[] = {
      {2, 8, 0, 16, false},    // stories260K group, first tile of a window
      {2, 8, 250, 17, false},  // rows crossing the 256-key chunk boundary, partial last blocks
      {2, 8, 700, 5, true, 4}, // pre-rotation rows spanning three chunks, 4 KV heads in one call
      {1, 12, 37, 3, true},    // generic head_dim, partial rotary (half 4 of 6 pairs)
      {4, 16, 5, 1, false},    // head_dim 16, 4 heads per group, a single decode-like row
      {3, 5, 0, 9, false, 2},  // odd head_dim, odd group, two KV heads
      {2, 8, 513, 1, false},   // one row whose last block holds a single key
      {8, 64, 250, 17, false},  // generic head_dim, 8 heads: the four-head score and value passes, block pairs
      {6, 20, 700, 5, false, 2},  // 6 heads (four, then two alone), rows spanning chunks, two KV heads
      {5, 10, 37, 3, true},    // pre-rotation (no block pairs), 4 + 1 heads, channels past a multiple of four
  };
  uint32_t seed = 100;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    EXPECT_STREQ(kernels::AttendTileTargetName(), hwy::TargetName(target));
    for (const TileCase& c : cases) {
      SCOPED_TRACE(::testing::Message() << "kv_mul " << c.kv_mul << " hd " << c.head_dim << " pos0 " << c.pos0
                                        << " rows " << c.n_rows << " pre-rotation " << c.pre_rotation);
      const int64_t hd = c.head_dim, n_k = c.pos0 + c.n_rows, nb = kernels::NumKeyBlocks(n_k);
      const int64_t G = c.n_groups, row_heads = G * c.kv_mul, group_stride = nb * hd * 8;
      const int64_t half = c.pre_rotation ? std::min<int64_t>(4, hd / 2) : 0;
      const int64_t q_stride = row_heads * hd + 3, out_stride = row_heads * hd + 2;  // rows wider than heads
      const std::vector<float> q = Random(static_cast<size_t>(c.n_rows * q_stride), seed++);
      const std::vector<float> k = Random(static_cast<size_t>(n_k * G * hd), seed++);
      const std::vector<float> v = Random(static_cast<size_t>(n_k * G * hd), seed++);
      std::vector<float> kb(static_cast<size_t>(G * group_stride)), vb(kb.size());
      kernels::PackKeyBlocks(k.data(), G * hd, n_k, G, hd, kb.data());
      kernels::PackKeyBlocks(v.data(), G * hd, n_k, G, hd, vb.data());
      // Per row: cos/sin of j * theta_row, theta_row,i = 0.9^i / (1 + row), in key blocks [nb_row, 2, half, 8].
      std::vector<std::vector<float>> tables(static_cast<size_t>(c.n_rows));
      std::vector<const float*> cs(static_cast<size_t>(c.n_rows), nullptr);
      if (c.pre_rotation) {
        for (int64_t i = 0; i < c.n_rows; ++i) {
          const int64_t n = c.pos0 + i + 1;
          std::vector<float>& t = tables[static_cast<size_t>(i)];
          t.assign(static_cast<size_t>(kernels::NumKeyBlocks(n) * 2 * half * 8), 0.0f);
          for (int64_t j = 0; j < n; ++j) {
            for (int64_t p = 0; p < half; ++p) {
              const double a = double(j) * std::pow(0.9, double(p)) / double(1 + i);
              t[static_cast<size_t>((j / 8) * 2 * half * 8 + p * 8 + j % 8)] = static_cast<float>(std::cos(a));
              t[static_cast<size_t>(((j / 8) * 2 + 1) * half * 8 + p * 8 + j % 8)] = static_cast<float>(std::sin(a));
            }
          }
          cs[static_cast<size_t>(i)] = t.data();
        }
      }
      kernels::AttendTileArgs a{};
      a.q = q.data();
      a.q_stride = q_stride;
      a.n_rows = c.n_rows;
      a.pos0 = c.pos0;
      a.kv_mul = c.kv_mul;
      a.head_dim = hd;
      a.n_groups = G;
      a.group_stride = group_stride;
      a.kb = kb.data();
      a.vb = vb.data();
      a.scale = 1.3f / std::sqrt(static_cast<float>(hd));
      a.cs = c.pre_rotation ? cs.data() : nullptr;
      a.half = half;
      a.out_stride = out_stride;
      const float kGuard = 12345.0f;  // the padding between output rows must stay untouched
      std::vector<float> got(static_cast<size_t>(c.n_rows * out_stride), kGuard), want = got;
      a.out = got.data();
      kernels::AttendTile(a);
      a.out = want.data();
      kernels::AttendTileScalar(a);
      // Scores and weights in double (for the bound), recomputed from the same float inputs.
      for (int64_t i = 0; i < c.n_rows; ++i) {
        const int64_t n = c.pos0 + i + 1;
        for (int64_t r = 0; r < row_heads; ++r) {
          const float* qr = q.data() + i * q_stride + r * hd;
          const float* kbg = kb.data() + (r / c.kv_mul) * group_stride;
          const float* vbg = vb.data() + (r / c.kv_mul) * group_stride;
          std::vector<double> sc(static_cast<size_t>(n)), w(static_cast<size_t>(n));
          double smax_abs = 0;
          for (int64_t j = 0; j < n; ++j) {
            std::vector<double> kr(static_cast<size_t>(hd));
            for (int64_t d = 0; d < hd; ++d) kr[d] = kbg[(j / 8) * hd * 8 + d * 8 + j % 8];
            for (int64_t p = 0; p < half; ++p) {
              const float* t = cs[static_cast<size_t>(i)] + (j / 8) * 2 * half * 8 + j % 8;
              const double x = kr[2 * p], y = kr[2 * p + 1], cp = t[p * 8], sp = t[(half + p) * 8];
              kr[2 * p] = x * cp - y * sp;
              kr[2 * p + 1] = x * sp + y * cp;
            }
            double dot = 0, abs_sum = 0;
            for (int64_t d = 0; d < hd; ++d) {
              dot += qr[d] * kr[d];
              abs_sum += std::fabs(qr[d] * kr[d]);
            }
            sc[j] = dot * a.scale;
            smax_abs = std::max(smax_abs, abs_sum * a.scale);
          }
          const double m = *std::max_element(sc.begin(), sc.end());
          double sum = 0;
          for (int64_t j = 0; j < n; ++j) sum += (w[j] = std::exp(sc[j] - m));
          for (double& x : w) x /= sum;
          for (int64_t d = 0; d < hd; ++d) {
            const size_t at = static_cast<size_t>(i * out_stride + r * hd + d);
            const double bound = TileBound(w, sc, vbg + d * 8, n, hd, smax_abs, want[at]);
            ASSERT_LE(std::fabs(double(got[at]) - double(want[at])), bound)
                << "row " << i << " head " << r << " channel " << d << ": " << got[at] << " vs " << want[at];
          }
        }
        for (int64_t x = row_heads * hd; x < out_stride; ++x) {
          ASSERT_EQ(got[static_cast<size_t>(i * out_stride + x)], kGuard) << "padding of row " << i;
        }
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Exp2Kernel (the attention kernel's 2^x) against the correctly rounded float64 value, on every target:
// within 2 ulp on [-126, 0], exact at integers, clamped below.
TEST(AttendTileTest, Exp2IsWithinTwoUlp) {
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    int64_t worst = 0;
    for (double x = -126.0; x <= 0.0; x += 0.000731) {
      const float xf = static_cast<float>(x);
      const float want = static_cast<float>(std::exp2(static_cast<double>(xf)));
      const int64_t ulp = testing::UlpDistance(kernels::Exp2Kernel(xf), want);
      worst = std::max(worst, ulp);
      ASSERT_LE(ulp, 2) << "x = " << xf;
    }
    for (int n = -126; n <= 0; ++n) ASSERT_EQ(kernels::Exp2Kernel(float(n)), std::ldexp(1.0f, n)) << "n = " << n;
    EXPECT_EQ(kernels::Exp2Kernel(-1000.0f), std::ldexp(1.0f, -126));
    EXPECT_EQ(kernels::Exp2Kernel(-std::numeric_limits<float>::infinity()), std::ldexp(1.0f, -126));
    RecordProperty(std::string("exp2_worst_ulp_") + hwy::TargetName(target), static_cast<int>(worst));
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace
}  // namespace posenc
