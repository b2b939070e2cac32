// Causal attention (static and pre-rotation) against a float64 reference written from the definition,
// on odd sizes, GQA groupings, strided inputs and head sizes with and without a specialised kernel.
#include <gtest/gtest.h>

#include <bit>

#include <cmath>
#include <random>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/exp_kernel.h"
#include "posenc/attention/simd8.h"
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

// The attention kernels use the 8-lane twin; it must give ExpF32's bits in every lane (same constants, same
// operations in the same order, no contraction), including the clamps and the non-positive variant.
TEST(AttentionTest, Exp8EqualsExpF32LaneByLane) {
  for (double x0 = -100.0; x0 <= 100.0; x0 += 0.731) {
    float xs[8], out[8], out_np[8];
    for (int i = 0; i < 8; ++i) xs[i] = static_cast<float>(x0 + 0.0917 * i);
    simd::Store(out, simd::Exp8(simd::Load(xs)));
    simd::Store(out_np, simd::Exp8<true>(simd::Load(xs)));
    for (int i = 0; i < 8; ++i) {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(ExpF32(xs[i]))) << "x = " << xs[i];
      if (xs[i] <= 0.0f) {
        ASSERT_EQ(std::bit_cast<uint32_t>(out_np[i]), std::bit_cast<uint32_t>(ExpF32(xs[i]))) << "x = " << xs[i];
      }
    }
  }
}

}  // namespace
}  // namespace posenc
