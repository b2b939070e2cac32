// The training halves of the attention tile kernels, on every Highway target this CPU has: AttendTile's base-2
// log-sum-exp output and AttendTileBackward (the FlashAttention-2 backward), both against a float64 evaluation of
// the definition and against their scalar twins, for the stories260K group (head_dim 8, 2 heads per KV head:
// dq accumulators in registers), one head per group, head_dim 16, generic head sizes and groups (accumulators in
// memory), partial last key blocks, tiles that start deep in the sequence, and pre-rotation rows.
//
// Bounds (u = 2^-24), derived from float32 rounding of each step of the definition (attention_kernels.h), for the
// given inputs q, k, v, out, dout and lse (the reference uses the same float32 lse, so both sides compute the same
// function of the same inputs):
//   weight P_ij = exp(s_ij - lse_i ln 2): the score sums hd products and is scaled twice (hd + 3) u S_ij, with
//     S_ij = scale sum_d |q_d k_j,d|; the subtraction u |s - lse|; exp 2 ulp + 2u => relative
//     e_P = (hd + 3) u S_ij + u |s_ij - lse_i ln 2| + 4u   (pre-rotation keys: + 3u S_ij for the rotation);
//   dP_ij = dout_i . v_j and D_i = dout_i . out_i: hd u times the sums of absolute products;
//   dS_ij = P (dP - D) (times ln 2 and its reciprocal on the SIMD path): |dS err| <= P [(e_P + 5u)(|dP| + |D|) +
//     hd u (sum |dout v| + sum |dout out|)] =: E_ij;
//   dq_i = scale sum_j dS_ij k_j: sum_j scale (E_ij |k| + (n + 3) u |dS_ij| |k|)  (n summands), dk likewise with q,
//     dv_j = sum_i P_ij dout_i: sum_i P |dout| (e_P + (n + 3) u); outputs accumulate onto their initial values,
//     and each of the n additions rounds a partial sum that holds the initial value: + (n + 2) u |initial|;
//     pre-rotation dk gets 3u more for R^T.
// lse: log2 of a sum of n exponentials of scores with error (hd + 3) u S: |err| <= ((hd + 3) S + n + 10) u log2(e)
//   + 2u |lse|.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "hwy/targets.h"
#include "posenc/kernels/key_blocks.h"
#include "posenc/kernels/attention_kernels.h"
#include "test_util.h"

namespace posenc::kernels {
namespace {

constexpr double kU = 0x1p-24;
constexpr double kLog2e = 1.4426950408889634;

struct Case {
  int64_t kv_mul, head_dim, pos0, n_rows;
  bool pre_rotation = false;
  int64_t half = 0;  // rotary pairs with pre-rotation
};

// Everything one case needs, in the kernels' layouts.
struct Inputs {
  Case c;
  int64_t n_k = 0, nb = 0;
  float scale = 0;
  std::vector<float> q, dout, kb, vb;          // q, dout [n_rows, kv_mul, hd]; blocks [nb, hd, 8]
  std::vector<float> cs;                       // per row [nb, 2, half, 8] (pre-rotation), rows concatenated
  std::vector<const float*> cs_rows;
  std::vector<float> out, lse;                 // float32 forward values from the float64 reference
  // float64 reference forward (per row, head): weights of keys [0, n)
  std::vector<double> ref_out, ref_lse;
};

float Key(const std::vector<float>& blocks, int64_t hd, int64_t j, int64_t d) {
  return blocks[static_cast<size_t>((j / 8) * hd * 8 + d * 8 + j % 8)];
}

// Key j as row i sees it (rotated by the row's table when pre-rotation), in double.
std::vector<double> SeenKey(const Inputs& in, int64_t i, int64_t j) {
  const int64_t hd = in.c.head_dim;
  std::vector<double> k(static_cast<size_t>(hd));
  for (int64_t d = 0; d < hd; ++d) k[static_cast<size_t>(d)] = Key(in.kb, hd, j, d);
  if (!in.c.pre_rotation) return k;
  const float* c = in.cs_rows[static_cast<size_t>(i)] + (j / 8) * 2 * in.c.half * 8 + j % 8;
  for (int64_t p = 0; p < in.c.half; ++p) {
    const double x = k[2 * p], y = k[2 * p + 1], cc = c[p * 8], ss = c[(in.c.half + p) * 8];
    k[2 * p] = x * cc - y * ss;
    k[2 * p + 1] = x * ss + y * cc;
  }
  return k;
}

Inputs MakeInputs(const Case& c, uint32_t seed) {
  Inputs in;
  in.c = c;
  const int64_t hd = c.head_dim, km = c.kv_mul;
  in.n_k = c.pos0 + c.n_rows;
  in.nb = NumKeyBlocks(in.n_k);
  in.scale = static_cast<float>(1.5 / std::sqrt(static_cast<double>(hd)));  // a softmax_scale_multiplier of 1.5
  std::vector<float> k = testing::RandomNormal(static_cast<size_t>(in.n_k * hd), seed);
  std::vector<float> v = testing::RandomNormal(static_cast<size_t>(in.n_k * hd), seed + 1);
  in.q = testing::RandomNormal(static_cast<size_t>(c.n_rows * km * hd), seed + 2);
  in.dout = testing::RandomNormal(in.q.size(), seed + 3);
  in.kb.resize(static_cast<size_t>(in.nb * hd * 8));
  in.vb.resize(in.kb.size());
  PackKeyBlocks(k.data(), hd, in.n_k, 1, hd, in.kb.data());
  PackKeyBlocks(v.data(), hd, in.n_k, 1, hd, in.vb.data());
  if (c.pre_rotation) {  // row i: angle j * theta_i,p with its own frequencies, |c^2 + s^2| != 1 (a folded factor)
    const int64_t row_floats = in.nb * 2 * c.half * 8;
    in.cs.assign(static_cast<size_t>(c.n_rows * row_floats), 0.0f);
    for (int64_t i = 0; i < c.n_rows; ++i) {
      for (int64_t j = 0; j < in.n_k; ++j) {
        for (int64_t p = 0; p < c.half; ++p) {
          const double theta = std::pow(100.0 + 7.0 * static_cast<double>(i), -2.0 * static_cast<double>(p) / (2.0 * c.half));
          float* blk = in.cs.data() + i * row_floats + (j / 8) * 2 * c.half * 8 + j % 8;
          blk[p * 8] = static_cast<float>(1.1 * std::cos(static_cast<double>(j) * theta));
          blk[(c.half + p) * 8] = static_cast<float>(1.1 * std::sin(static_cast<double>(j) * theta));
        }
      }
    }
    for (int64_t i = 0; i < c.n_rows; ++i) in.cs_rows.push_back(in.cs.data() + i * row_floats);
  }
  // float64 forward from the definition, rounded to float32 for the backward's inputs
  in.out.resize(in.q.size());
  in.lse.resize(static_cast<size_t>(c.n_rows * km));
  for (int64_t i = 0; i < c.n_rows; ++i) {
    const int64_t n = c.pos0 + i + 1;
    for (int64_t r = 0; r < km; ++r) {
      const float* q = in.q.data() + (i * km + r) * hd;
      std::vector<double> s(static_cast<size_t>(n));
      double m = -INFINITY;
      for (int64_t j = 0; j < n; ++j) {
        const std::vector<double> kj = SeenKey(in, i, j);
        double dot = 0;
        for (int64_t d = 0; d < hd; ++d) dot += q[d] * kj[static_cast<size_t>(d)];
        s[static_cast<size_t>(j)] = dot * in.scale;
        m = std::max(m, s[static_cast<size_t>(j)]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0;
        for (int64_t j = 0; j < n; ++j) acc += s[static_cast<size_t>(j)] * Key(in.vb, hd, j, d);
        in.ref_out.push_back(acc / sum);
        in.out[static_cast<size_t>((i * km + r) * hd + d)] = static_cast<float>(acc / sum);
      }
      in.ref_lse.push_back((m + std::log(sum)) * kLog2e);
      in.lse[static_cast<size_t>(i * km + r)] = static_cast<float>((m + std::log(sum)) * kLog2e);
    }
  }
  return in;
}

// Outputs of one backward call, starting from the same nonzero values (the kernel accumulates).
struct Grads {
  std::vector<float> dq, dkb, dvb;
};

Grads Initial(const Inputs& in) {
  Grads g;
  g.dq = testing::RandomNormal(in.q.size(), 77);
  g.dkb.assign(in.kb.size(), 0.0f);
  g.dvb.assign(in.kb.size(), 0.0f);
  const std::vector<float> dk0 = testing::RandomNormal(static_cast<size_t>(in.n_k * in.c.head_dim), 78);
  const std::vector<float> dv0 = testing::RandomNormal(dk0.size(), 79);
  PackKeyBlocks(dk0.data(), in.c.head_dim, in.n_k, 1, in.c.head_dim, g.dkb.data());
  PackKeyBlocks(dv0.data(), in.c.head_dim, in.n_k, 1, in.c.head_dim, g.dvb.data());
  return g;
}

AttendTileBackwardArgs Args(const Inputs& in, Grads& g) {
  const int64_t hd = in.c.head_dim, km = in.c.kv_mul;
  AttendTileBackwardArgs a{};
  a.q = in.q.data();
  a.q_stride = km * hd;
  a.out = in.out.data();
  a.out_stride = km * hd;
  a.dout = in.dout.data();
  a.dout_stride = km * hd;
  a.lse = in.lse.data();
  a.lse_stride = km;
  a.n_rows = in.c.n_rows;
  a.pos0 = in.c.pos0;
  a.kv_mul = km;
  a.head_dim = hd;
  a.kb = in.kb.data();
  a.vb = in.vb.data();
  a.scale = in.scale;
  a.cs = in.c.pre_rotation ? in.cs_rows.data() : nullptr;
  a.half = in.c.half;
  a.dq = g.dq.data();
  a.dq_stride = km * hd;
  a.dkb = g.dkb.data();
  a.dvb = g.dvb.data();
  return a;
}

// The float64 reference backward and the bound of each output (see the file comment), in the kernels' layouts.
struct Reference {
  std::vector<double> dq, dkb, dvb;
  std::vector<double> bq, bk, bv;
};

Reference ReferenceBackward(const Inputs& in, const Grads& initial) {
  const int64_t hd = in.c.head_dim, km = in.c.kv_mul;
  Reference ref;
  ref.dq.assign(initial.dq.begin(), initial.dq.end());
  ref.dkb.assign(initial.dkb.begin(), initial.dkb.end());
  ref.dvb.assign(initial.dvb.begin(), initial.dvb.end());
  ref.bq.resize(ref.dq.size());
  ref.bk.resize(ref.dkb.size());
  ref.bv.resize(ref.dvb.size());
  const double n_sum = static_cast<double>(in.n_k + in.c.n_rows * km);  // longest sum of any output
  // each of the n_sum additions onto an initial value rounds a partial sum that contains it
  for (size_t x = 0; x < ref.dq.size(); ++x) ref.bq[x] = (n_sum + 2) * kU * std::fabs(ref.dq[x]);
  for (size_t x = 0; x < ref.dkb.size(); ++x) ref.bk[x] = (n_sum + 2) * kU * std::fabs(ref.dkb[x]);
  for (size_t x = 0; x < ref.dvb.size(); ++x) ref.bv[x] = (n_sum + 2) * kU * std::fabs(ref.dvb[x]);
  const double rot = in.c.pre_rotation ? 3.0 : 0.0;
  for (int64_t i = 0; i < in.c.n_rows; ++i) {
    const int64_t n = in.c.pos0 + i + 1;
    for (int64_t r = 0; r < km; ++r) {
      const float* q = in.q.data() + (i * km + r) * hd;
      const float* o = in.out.data() + (i * km + r) * hd;
      const float* go = in.dout.data() + (i * km + r) * hd;
      const double lse = static_cast<double>(in.lse[static_cast<size_t>(i * km + r)]) / kLog2e;
      double D = 0, Dabs = 0;
      for (int64_t d = 0; d < hd; ++d) {
        D += static_cast<double>(go[d]) * o[d];
        Dabs += std::fabs(static_cast<double>(go[d]) * o[d]);
      }
      for (int64_t j = 0; j < n; ++j) {
        const std::vector<double> kj = SeenKey(in, i, j);
        double dot = 0, S = 0, dp = 0, dpabs = 0;
        for (int64_t d = 0; d < hd; ++d) {
          dot += q[d] * kj[static_cast<size_t>(d)];
          S += std::fabs(q[d] * kj[static_cast<size_t>(d)]);
          const double vd = Key(in.vb, hd, j, d);
          dp += go[d] * vd;
          dpabs += std::fabs(go[d] * vd);
        }
        const double s = dot * in.scale;
        S *= in.scale;
        const double P = std::exp(s - lse);
        const double eP = (static_cast<double>(hd) + 3 + rot) * kU * S + kU * std::fabs(s - lse) + 4 * kU;
        const double dS = P * (dp - D);
        const double E = P * ((eP + 5 * kU) * (std::fabs(dp) + std::fabs(D)) + static_cast<double>(hd) * kU * (dpabs + Dabs));
        std::vector<double> gk(static_cast<size_t>(hd)), gkb(gk.size());
        for (int64_t d = 0; d < hd; ++d) {
          const size_t at = static_cast<size_t>((j / 8) * hd * 8 + d * 8 + j % 8);
          ref.dvb[at] += P * go[d];
          ref.bv[at] += P * std::fabs(go[d]) * (eP + (n_sum + 3) * kU);
          const size_t qi = static_cast<size_t>((i * km + r) * hd + d);
          ref.dq[qi] += in.scale * dS * kj[static_cast<size_t>(d)];
          ref.bq[qi] += in.scale * std::fabs(kj[static_cast<size_t>(d)]) * (E + (n_sum + 3 + rot) * kU * std::fabs(dS));
          gk[static_cast<size_t>(d)] = in.scale * dS * q[d];
          gkb[static_cast<size_t>(d)] = in.scale * std::fabs(q[d]) * (E + (n_sum + 6 + rot) * kU * std::fabs(dS));
        }
        if (in.c.pre_rotation) {  // R^T back to the raw key
          const float* c = in.cs_rows[static_cast<size_t>(i)] + (j / 8) * 2 * in.c.half * 8 + j % 8;
          for (int64_t p = 0; p < in.c.half; ++p) {
            const double x = gk[2 * p], y = gk[2 * p + 1], cc = c[p * 8], ss = c[(in.c.half + p) * 8];
            gk[2 * p] = x * cc + y * ss;
            gk[2 * p + 1] = y * cc - x * ss;
            const double bx = gkb[2 * p], by = gkb[2 * p + 1], m = std::fabs(cc) + std::fabs(ss);
            gkb[2 * p] = gkb[2 * p + 1] = (bx + by) * m + 3 * kU * (std::fabs(x) + std::fabs(y)) * m;
          }
        }
        for (int64_t d = 0; d < hd; ++d) {
          const size_t at = static_cast<size_t>((j / 8) * hd * 8 + d * 8 + j % 8);
          ref.dkb[at] += gk[static_cast<size_t>(d)];
          ref.bk[at] += gkb[static_cast<size_t>(d)];
        }
      }
    }
  }
  return ref;
}

// Number of elements of `got` outside ref +- bound (reports the first few).
int Compare(const char* what, const std::vector<float>& got, const std::vector<double>& ref,
            const std::vector<double>& bound) {
  int bad = 0;
  for (size_t x = 0; x < got.size(); ++x) {
    const double err = std::fabs(static_cast<double>(got[x]) - ref[x]);
    if (!(err <= bound[x]) && bad++ < 3) {
      ADD_FAILURE() << what << "[" << x << "] = " << got[x] << ", float64 " << ref[x] << ", |err| " << err
                    << " > bound " << bound[x];
    }
  }
  return bad;
}

const Case kCases[] = {
    {2, 8, 0, 16},          // stories260K group, first tile (register accumulators on AVX2/AVX3)
    {2, 8, 250, 13},        // rows deep in the sequence, partial last blocks
    {1, 8, 3, 9},           // one head per KV head
    {1, 16, 11, 6},         // head_dim 16
    {3, 8, 20, 7},          // odd group size: generic heads
    {2, 5, 0, 11},          // odd head_dim: generic channels
    {2, 8, 30, 10, true, 4},  // pre-rotation rows (every channel rotated)
    {3, 12, 9, 5, true, 4},   // pre-rotation with partial rotary (4 of 6 pairs)
};

TEST(AttentionBackwardKernelTest, MatchesFloat64AndScalarTwinOnEveryTarget) {
  uint32_t seed = 900;
  std::vector<Inputs> inputs;
  for (const Case& c : kCases) inputs.push_back(MakeInputs(c, seed += 10));
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    for (const Inputs& in : inputs) {
      const Case& c = in.c;
      SCOPED_TRACE(::testing::Message() << "kv_mul " << c.kv_mul << " hd " << c.head_dim << " pos0 " << c.pos0
                                        << " rows " << c.n_rows << " pre-rotation " << c.pre_rotation);
      const Grads initial = Initial(in);
      const Reference ref = ReferenceBackward(in, initial);
      Grads simd = initial, scalar = initial;
      AttendTileBackward(Args(in, simd));
      AttendTileBackwardScalar(Args(in, scalar));
      for (const auto& [name, g] : {std::pair<const char*, const Grads*>{"simd", &simd}, {"scalar", &scalar}}) {
        SCOPED_TRACE(name);
        EXPECT_EQ(Compare("dq", g->dq, ref.dq, ref.bq), 0);
        EXPECT_EQ(Compare("dk", g->dkb, ref.dkb, ref.bk), 0);
        EXPECT_EQ(Compare("dv", g->dvb, ref.dvb, ref.bv), 0);
      }
    }
  }
  hwy::SetSupportedTargetsForTest(0);
}

// Lanes past the causal limit and keys past n_k must not receive gradient, whatever their contents.
TEST(AttentionBackwardKernelTest, KeysAfterTheLastRowGetNothing) {
  Case c{2, 8, 5, 3};
  Inputs in = MakeInputs(c, 5);
  // keys 8 .. 15 exist in the blocks (a longer sequence) but rows reach key 7 only
  for (int64_t d = 0; d < 8; ++d) {
    for (int64_t l = 0; l < 8; ++l) in.kb.push_back(1e30f), in.vb.push_back(-1e30f);
  }
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    SCOPED_TRACE(hwy::TargetName(target));
    Grads g;
    g.dq.assign(in.q.size(), 0.0f);
    g.dkb.assign(in.kb.size(), 0.0f);
    g.dvb.assign(in.kb.size(), 0.0f);
    AttendTileBackward(Args(in, g));
    for (size_t x = 64; x < g.dkb.size(); ++x) {
      ASSERT_EQ(g.dkb[x], 0.0f) << x;
      ASSERT_EQ(g.dvb[x], 0.0f) << x;
    }
    for (float x : g.dq) ASSERT_TRUE(std::isfinite(x));
  }
  hwy::SetSupportedTargetsForTest(0);
}

TEST(AttentionBackwardKernelTest, ForwardLogSumExpMatchesFloat64OnEveryTarget) {
  uint32_t seed = 300;
  for (const Case& c : kCases) {
    const Inputs in = MakeInputs(c, seed += 10);
    const int64_t hd = c.head_dim, km = c.kv_mul;
    for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
      hwy::SetSupportedTargetsForTest(target);
      SCOPED_TRACE(hwy::TargetName(target));
      std::vector<float> out_simd(in.q.size()), out_scalar(in.q.size());
      std::vector<float> lse_simd(in.lse.size(), NAN), lse_scalar(in.lse.size(), NAN);
      AttendTileArgs a{};
      a.q = in.q.data();
      a.q_stride = km * hd;
      a.n_rows = c.n_rows;
      a.pos0 = c.pos0;
      a.kv_mul = km;
      a.head_dim = hd;
      a.kb = in.kb.data();
      a.vb = in.vb.data();
      a.scale = in.scale;
      a.cs = c.pre_rotation ? in.cs_rows.data() : nullptr;
      a.half = c.half;
      a.out_stride = km * hd;
      a.lse_stride = km;
      a.out = out_simd.data();
      a.lse = lse_simd.data();
      AttendTile(a);
      a.out = out_scalar.data();
      a.lse = lse_scalar.data();
      AttendTileScalar(a);
      for (int64_t i = 0; i < c.n_rows; ++i) {
        const int64_t n = c.pos0 + i + 1;
        for (int64_t r = 0; r < km; ++r) {
          double S = 0;  // max_j scale * sum |q k|
          for (int64_t j = 0; j < n; ++j) {
            const std::vector<double> kj = SeenKey(in, i, j);
            double sj = 0;
            for (int64_t d = 0; d < hd; ++d) sj += std::fabs(in.q[static_cast<size_t>((i * km + r) * hd + d)] * kj[static_cast<size_t>(d)]);
            S = std::max(S, sj * in.scale);
          }
          const size_t x = static_cast<size_t>(i * km + r);
          const double ref = in.ref_lse[x];
          const double bound =
              ((static_cast<double>(hd) + 6) * S + static_cast<double>(n) + 10) * kU * kLog2e + 2 * kU * std::fabs(ref);
          EXPECT_LE(std::fabs(lse_simd[x] - ref), bound) << "simd row " << i << " head " << r;
          EXPECT_LE(std::fabs(lse_scalar[x] - ref), bound) << "scalar row " << i << " head " << r;
        }
      }
    }
    hwy::SetSupportedTargetsForTest(0);
  }
}

}  // namespace
}  // namespace posenc::kernels
