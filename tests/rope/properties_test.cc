// Mathematical properties of RoPE on random inputs: relative-position invariance, additivity, inverse,
// backward = transpose, norm scaling, layout equivalence, partial rotary pass-through, low-precision storage,
// strided views and cache growth. Tolerances are float32 rounding bounds derived in each test.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/position_ids.h"
#include "test_util.h"

namespace posenc {
namespace {

constexpr double kEps = 0x1p-24;  // float32 unit roundoff

std::vector<float> Random(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

RopeParams Llama(int64_t head_dim = 64, int64_t rotary_dim = 0) {
  RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = rotary_dim;
  p.rope_theta = 10000.0;
  return p;
}

RopeParams Yarn() {
  RopeParams p = Llama();
  p.rope_type = RopeType::kYarn;
  p.factor = 16.0;
  p.original_max_position_embeddings = 2048;
  return p;
}

// One head vector rotated to `pos` (exact precision, folded attention factor).
std::vector<float> Rot(std::vector<float> x, const RopeFrequencies& f, int64_t pos, RopeLayout layout,
                       RopeDirection dir = RopeDirection::kForward) {
  const CosSinTable t = ComputeCosSin(f, std::vector<int64_t>{pos});
  const int64_t row = 0;
  ApplyRope(HeadsView::Contiguous(x.data(), 1, 1, static_cast<int64_t>(x.size())), std::span<const int64_t>(&row, 1),
            View(t), layout, dir);
  return x;
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Per-element bound for one rotation of pair (a, b) with tables within 1 ulp: each of a*c, b*s, and their
// difference rounds once (3 eps relative to |a|+|b|) and c, s carry 1 ulp each (1 eps): 4 eps (|a| + |b|)
// times the attention factor.
double PairBound(double a, double b, double att) { return 4 * kEps * (std::fabs(a) + std::fabs(b)) * att; }

class RopeProperty : public ::testing::TestWithParam<RopeLayout> {};

TEST_P(RopeProperty, ScoreDependsOnlyOnRelativePosition) {
  const RopeLayout layout = GetParam();
  const RopeFrequencies f = ComputeRopeFrequencies(Llama());
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> pos(0, 100000);
  for (int trial = 0; trial < 50; ++trial) {
    const std::vector<float> q = Random(64, 100 + trial), k = Random(64, 200 + trial);
    const int64_t m = pos(rng), n = pos(rng), t = pos(rng);
    const double s1 = Dot(Rot(q, f, m, layout), Rot(k, f, n, layout));
    const double s2 = Dot(Rot(q, f, m + t, layout), Rot(k, f, n + t, layout));
    // each rotated element is off by <= PairBound; the double-precision dot adds nothing measurable:
    // |score error| <= sum_j |q_j|' * bound(k_j) + bound(q_j) * |k_j|', twice (two scores).
    double bound = 0;
    for (size_t j = 0; j < 64; ++j) {
      const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
      bound += (std::fabs(q[j]) + std::fabs(q[partner])) * PairBound(k[j], k[partner], 1) +
               (std::fabs(k[j]) + std::fabs(k[partner])) * PairBound(q[j], q[partner], 1);
    }
    EXPECT_NEAR(s1, s2, 2 * bound) << "m " << m << " n " << n << " t " << t;
  }
}

TEST_P(RopeProperty, RotationsAdd) {
  const RopeLayout layout = GetParam();
  const RopeFrequencies f = ComputeRopeFrequencies(Llama());
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<float> x = Random(64, 300 + trial);
    const int64_t a = 37 * trial + 5, b = 4096 + 911 * trial;
    const std::vector<float> two = Rot(Rot(x, f, b, layout), f, a, layout);
    const std::vector<float> one = Rot(x, f, a + b, layout);
    for (size_t j = 0; j < 64; ++j) {
      const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
      // three rotations' worth of rounding (two on one side, one on the other)
      EXPECT_NEAR(two[j], one[j], 3 * PairBound(x[j], x[partner], 1)) << "element " << j;
    }
  }
}

TEST_P(RopeProperty, InverseUndoesForwardEvenWithAttentionFactor) {
  const RopeLayout layout = GetParam();
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  ASSERT_GT(f.attention_factor, 1.2);
  const std::vector<float> x = Random(64, 400);
  for (int64_t pos : {0, 1, 777, 65535, 1000000}) {
    const std::vector<float> back = Rot(Rot(x, f, pos, layout), f, pos, layout, RopeDirection::kInverse);
    for (size_t j = 0; j < 64; ++j) {
      const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
      // forward (4 eps), inverse products and sum (3 eps), 1/(c^2+s^2) (3 eps) and the final product (1 eps)
      EXPECT_NEAR(back[j], x[j], 11 * kEps * (std::fabs(x[j]) + std::fabs(x[partner]))) << "pos " << pos;
    }
  }
}

TEST_P(RopeProperty, BackwardIsTheTranspose) {
  const RopeLayout layout = GetParam();
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  const std::vector<float> x = Random(64, 500), g = Random(64, 501);
  for (int64_t pos : {3, 5000, 123456}) {
    // <R x, g> == <x, R^T g> (the gradient identity), with R scaled by the attention factor
    const double lhs = Dot(Rot(x, f, pos, layout), g);
    const double rhs = Dot(x, Rot(g, f, pos, layout, RopeDirection::kBackward));
    double bound = 0;
    for (size_t j = 0; j < 64; ++j) {
      const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
      bound += std::fabs(g[j]) * PairBound(x[j], x[partner], f.attention_factor) +
               std::fabs(x[j]) * PairBound(g[j], g[partner], f.attention_factor);
    }
    EXPECT_NEAR(lhs, rhs, bound);
  }
}

TEST_P(RopeProperty, NormScalesByAttentionFactor) {
  const RopeLayout layout = GetParam();
  for (const RopeParams& p : {Llama(), Yarn()}) {
    const RopeFrequencies f = ComputeRopeFrequencies(p);
    const std::vector<float> x = Random(64, 600);
    const double norm = std::sqrt(Dot(x, x));
    for (int64_t pos : {0, 9, 31337, 524287}) {
      const std::vector<float> y = Rot(x, f, pos, layout);
      // each element within PairBound; the norm moves by at most the 2-norm of those errors
      double err2 = 0;
      for (size_t j = 0; j < 64; ++j) {
        const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
        err2 += std::pow(PairBound(x[j], x[partner], f.attention_factor), 2);
      }
      EXPECT_NEAR(std::sqrt(Dot(y, y)), f.attention_factor * norm, std::sqrt(err2)) << "pos " << pos;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, RopeProperty, ::testing::Values(RopeLayout::kHalfSplit, RopeLayout::kInterleaved),
                         [](const auto& info) {
                           return std::string(info.param == RopeLayout::kHalfSplit ? "HalfSplit" : "Interleaved");
                         });

TEST(RopeLayouts, InterleavedEqualsHalfSplitUnderThePairPermutation) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(64, 48));  // partial: 24 pairs of 64 channels
  const std::vector<float> x = Random(64, 700);
  // perm maps the interleaved channel order to half-split: pair i (2i, 2i+1) -> (i, i + 24)
  std::vector<float> xp = x;
  for (size_t i = 0; i < 24; ++i) {
    xp[i] = x[2 * i];
    xp[i + 24] = x[2 * i + 1];
  }
  for (int64_t pos : {1, 4095, 70000}) {
    const std::vector<float> a = Rot(x, f, pos, RopeLayout::kInterleaved);
    const std::vector<float> b = Rot(xp, f, pos, RopeLayout::kHalfSplit);
    for (size_t i = 0; i < 24; ++i) {
      EXPECT_EQ(a[2 * i], b[i]);
      EXPECT_EQ(a[2 * i + 1], b[i + 24]);
    }
    for (size_t j = 48; j < 64; ++j) EXPECT_EQ(a[j], x[j]);
  }
}

TEST(RopePartial, PassThroughChannelsBitIdenticalInPlaceAndOutOfPlace) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(64, 16));
  std::vector<float> x = Random(5 * 3 * 64, 800);
  // include values whose bits would change under any arithmetic: NaN payload, -0, subnormal
  x[20] = std::nanf("0x123");
  x[21] = -0.0f;
  x[22] = 1e-42f;
  const std::vector<float> original = x;
  std::vector<float> out(x.size(), 9.0f);
  RopeCache cache(f);
  const std::vector<int64_t> pos = PositionRange(100, 5);
  ApplyRope(HeadsView::Contiguous(x.data(), 5, 3, 64), HeadsView::Contiguous(out.data(), 5, 3, 64), pos,
            cache.Covering(pos), RopeLayout::kHalfSplit);
  EXPECT_EQ(0, std::memcmp(x.data(), original.data(), x.size() * 4));  // input untouched
  ApplyRope(HeadsView::Contiguous(x.data(), 5, 3, 64), pos, cache, RopeLayout::kHalfSplit);
  EXPECT_EQ(0, std::memcmp(x.data(), out.data(), x.size() * 4));  // in place == out of place
  for (size_t t = 0; t < 15; ++t) {
    EXPECT_EQ(0, std::memcmp(x.data() + t * 64 + 16, original.data() + t * 64 + 16, 48 * 4)) << "head " << t;
  }
}

// Large out-of-place calls copy and rotate blocks of tokens, on OpenMP threads when big enough: the same bits as
// rotating a copy in place, into a head-major output from a token-major input, for float32 and bfloat16; the
// input is untouched.
TEST(RopeOutOfPlace, LargeBlockedCallEqualsCopyThenRotateInPlace) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(64, 48));
  const int64_t T = 3000, H = 4, D = 64;  // 3 MiB of float32 moved each way: several blocks, threads allowed
  const std::vector<float> x = Random(static_cast<size_t>(T * H * D), 850);
  const std::vector<int64_t> pos = PositionRange(7, T);
  const CosSinTable t = ComputeCosSin(f, pos);
  const std::vector<int64_t> rows = PositionRange(0, T);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(std::string(DTypeName(dtype)));
    const int64_t es = DTypeSize(dtype);
    std::vector<char> in(static_cast<size_t>(T * H * D * es)), out(in.size()), expected(in.size());
    for (size_t i = 0; i < x.size(); ++i) {
      if (dtype == DType::kF32) {
        std::memcpy(in.data() + i * 4, &x[i], 4);
      } else {
        const uint16_t b = F32ToBF16(x[i]);
        std::memcpy(in.data() + i * 2, &b, 2);
      }
    }
    const std::vector<char> original = in;
    // expected: head-major copy of the input, rotated in place
    for (int64_t tok = 0; tok < T; ++tok) {
      for (int64_t h = 0; h < H; ++h) {
        std::memcpy(expected.data() + (h * T + tok) * D * es, in.data() + (tok * H + h) * D * es,
                    static_cast<size_t>(D * es));
      }
    }
    const HeadsView head_major_expected{expected.data(), dtype, T, H, D, D, T * D};
    ApplyRope(head_major_expected, rows, View(t), RopeLayout::kHalfSplit);
    const HeadsView head_major_out{out.data(), dtype, T, H, D, D, T * D};
    ApplyRope(HeadsView::Contiguous(in.data(), dtype, T, H, D), head_major_out, rows, View(t),
              RopeLayout::kHalfSplit);
    EXPECT_EQ(0, std::memcmp(out.data(), expected.data(), out.size()));
    EXPECT_EQ(0, std::memcmp(in.data(), original.data(), in.size()));
  }
}

TEST(RopeDtypes, HalfPrecisionStorageRotatesInFloat32AndRoundsOnce) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(64));
  const std::vector<float> x = Random(4 * 2 * 64, 900);
  const std::vector<int64_t> pos = {0, 17, 4096, 123456};
  const CosSinTable t = ComputeCosSin(f, pos);
  const std::vector<int64_t> rows = PositionRange(0, 4);
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    auto to = [&](float v) { return dtype == DType::kBF16 ? F32ToBF16(v) : F32ToF16(v); };
    auto from = [&](uint16_t b) { return dtype == DType::kBF16 ? BF16ToF32(b) : F16ToF32(b); };
    std::vector<uint16_t> h(x.size());
    std::vector<float> widened(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      h[i] = to(x[i]);
      widened[i] = from(h[i]);
    }
    ApplyRope(HeadsView::Contiguous(h.data(), dtype, 4, 2, 64), rows, View(t), RopeLayout::kHalfSplit);
    ApplyRope(HeadsView::Contiguous(widened.data(), 4, 2, 64), rows, View(t), RopeLayout::kHalfSplit);
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(h[i], to(widened[i])) << DTypeName(dtype) << " element " << i;  // float32 math, one rounding
    }
  }
}

TEST(RopeStrides, HeadMajorAndTokenMajorAndPackedQkvAgree) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(32));
  const int64_t T = 7, H = 3, D = 32;
  const std::vector<float> base = Random(static_cast<size_t>(T * H * D), 1000);
  const std::vector<int64_t> pos = {5, 0, 9, 9, 2, 1000, 3};
  RopeCache cache(f);
  // token-major [T, H, D]
  std::vector<float> tm = base;
  ApplyRope(HeadsView::Contiguous(tm.data(), T, H, D), pos, cache, RopeLayout::kInterleaved);
  // head-major [H, T, D] holding the same vectors
  std::vector<float> hm(base.size());
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      std::copy_n(base.begin() + (t * H + h) * D, D, hm.begin() + (h * T + t) * D);
    }
  }
  ApplyRope(HeadsView{hm.data(), DType::kF32, T, H, D, D, T * D}, pos, cache, RopeLayout::kInterleaved);
  // packed qkv [T, 3H, D]: rotate only the q slice (heads 0..H-1), leave k and v
  std::vector<float> qkv(static_cast<size_t>(T * 3 * H * D), 0.25f);
  for (int64_t t = 0; t < T; ++t) std::copy_n(base.begin() + t * H * D, H * D, qkv.begin() + t * 3 * H * D);
  ApplyRope(HeadsView{qkv.data(), DType::kF32, T, H, D, 3 * H * D, D}, pos, cache, RopeLayout::kInterleaved);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < D; ++d) {
        const float want = tm[static_cast<size_t>((t * H + h) * D + d)];
        EXPECT_EQ(hm[static_cast<size_t>((h * T + t) * D + d)], want);
        EXPECT_EQ(qkv[static_cast<size_t>(t * 3 * H * D + h * D + d)], want);
      }
    }
    for (int64_t j = H * D; j < 3 * H * D; ++j) EXPECT_EQ(qkv[static_cast<size_t>(t * 3 * H * D + j)], 0.25f);
  }
}

TEST(RopeCacheTest, GrowsOnDemandAndMatchesOnTheFlyBitForBit) {
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  for (RopePrecision precision : {RopePrecision::kExact, RopePrecision::kHf}) {
    RopeCache cache(f, precision);
    EXPECT_EQ(cache.length(), 0);
    const std::vector<int64_t> first = {3, 1};
    cache.Covering(first);
    EXPECT_GE(cache.length(), 4);
    const std::vector<int64_t> later = {10000};
    const CosSinView v = cache.Covering(later);
    EXPECT_GE(v.n_rows, 10001);
    const CosSinTable direct = ComputeCosSin(f, PositionRange(0, v.n_rows), precision);
    EXPECT_EQ(0, std::memcmp(v.cos, direct.cos.data(), direct.cos.size() * 4));
    EXPECT_EQ(0, std::memcmp(v.sin, direct.sin.data(), direct.sin.size() * 4));
  }
}

TEST(RopeCosSin, FoldedEqualsApartTimesAttentionFactor) {
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  const std::vector<int64_t> pos = {0, 1, 99, 8191, -5};
  const CosSinTable folded = ComputeCosSin(f, pos, RopePrecision::kExact, AttentionFold::kFolded);
  const CosSinTable apart = ComputeCosSin(f, pos, RopePrecision::kExact, AttentionFold::kApart);
  for (size_t i = 0; i < folded.cos.size(); ++i) {
    // exact mode folds in double and rounds once: within 1 ulp of (rounded plain value) * factor
    EXPECT_NEAR(folded.cos[i], apart.cos[i] * f.attention_factor,
                testing::UlpOf(folded.cos[i]) + testing::UlpOf(apart.cos[i]) * f.attention_factor);
    EXPECT_LE(std::fabs(apart.cos[i]), 1.0f);
  }
  // negative positions rotate backwards: cos even, sin odd
  const CosSinTable plus = ComputeCosSin(f, std::vector<int64_t>{5}), minus = ComputeCosSin(f, std::vector<int64_t>{-5});
  for (int64_t i = 0; i < plus.half; ++i) {
    EXPECT_EQ(plus.cos[static_cast<size_t>(i)], minus.cos[static_cast<size_t>(i)]);
    EXPECT_EQ(plus.sin[static_cast<size_t>(i)], -minus.sin[static_cast<size_t>(i)]);
  }
}

// Precision modes against a long-double truth for positions up to 2^24: exact stays within 1 ulp; hf is
// off by the float32 angle rounding, |d angle| <= ulp(angle)/2, which the test bounds instead.
TEST(RopeCosSin, ExactWithinOneUlpOfTruthHfWithinAngleRounding) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama(128));
  std::vector<int64_t> pos;
  for (int64_t p = 1; p < (int64_t{1} << 24); p = p * 3 + 1) pos.push_back(p);
  pos.push_back((int64_t{1} << 24) - 1);
  const CosSinTable ex = ComputeCosSin(f, pos, RopePrecision::kExact);
  const CosSinTable hf = ComputeCosSin(f, pos, RopePrecision::kHf);
  for (size_t r = 0; r < pos.size(); ++r) {
    for (int64_t i = 0; i < ex.half; ++i) {
      const size_t k = static_cast<size_t>(static_cast<int64_t>(r) * ex.half + i);
      const long double angle = static_cast<long double>(f.inv_freq[static_cast<size_t>(i)]) * pos[r];
      const double truth = static_cast<double>(std::cos(angle));
      EXPECT_LE(std::fabs(ex.cos[k] - truth), testing::UlpOf(static_cast<float>(truth))) << pos[r] << " " << i;
      const float angle32 = f.inv_freq[static_cast<size_t>(i)] * static_cast<float>(pos[r]);
      EXPECT_LE(std::fabs(hf.cos[k] - truth), testing::UlpOf(angle32) / 2 + testing::UlpOf(hf.cos[k]))
          << pos[r] << " " << i;
    }
  }
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// cos/sin on the fly (ApplyRope / ApplyRopeQK with RopeOnTheFly): the score q.k depends only on the relative
// position, also for negative positions, with the same per-element bound as the table path (PairBound assumes
// coefficients within 1 ulp of the truth; the on-the-fly ones are within 0.51 ulp, kernels/sincos.h).
TEST(RopeOnTheFlyApi, ScoreDependsOnlyOnRelativePosition) {
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  const RopeOnTheFly fly = RopeOnTheFly::From(f, RopePrecision::kExact, AttentionFold::kApart);
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int64_t> pos(-1000000, 1000000);
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (int trial = 0; trial < 30; ++trial) {
      const std::vector<float> q0 = Random(64, 900 + trial), k0 = Random(64, 950 + trial);
      const int64_t m = pos(rng), n = pos(rng), t = pos(rng);
      auto score = [&](int64_t pq, int64_t pk) {
        std::vector<float> q = q0, k = k0;
        const std::vector<int64_t> ids{pq};
        const std::vector<int64_t> ids_k{pk};
        ApplyRope(HeadsView::Contiguous(q.data(), 1, 1, 64), ids, fly, layout);
        ApplyRope(HeadsView::Contiguous(k.data(), 1, 1, 64), ids_k, fly, layout);
        return Dot(q, k);
      };
      double bound = 0;
      for (size_t j = 0; j < 64; ++j) {
        const size_t partner = layout == RopeLayout::kInterleaved ? (j ^ 1) : (j + 32) % 64;
        bound += (std::fabs(q0[j]) + std::fabs(q0[partner])) * PairBound(k0[j], k0[partner], 1) +
                 (std::fabs(k0[j]) + std::fabs(k0[partner])) * PairBound(q0[j], q0[partner], 1);
      }
      EXPECT_NEAR(score(m, n), score(m + t, n + t), 2 * bound) << "m " << m << " n " << n << " t " << t;
    }
  }
}

// Q and K on the fly in one call against the table path (ComputeCosSin rows), yarn with its attention factor
// folded, bfloat16: both round float32 values that differ by at most 6u (|p1| + |p2|) (rope_kernels_test.cc,
// OnTheFlyMatchesTablePath), so the stored values differ by at most one bfloat16 unit beyond that.
TEST(RopeOnTheFlyApi, QkMatchesTablePath) {
  const RopeFrequencies f = ComputeRopeFrequencies(Yarn());
  const std::vector<int64_t> positions{0, 5, 4095, 65536, 300000};
  const CosSinTable table = ComputeCosSin(f, positions);
  std::vector<int64_t> rows{0, 1, 2, 3, 4};
  const std::vector<float> q32 = Random(5 * 4 * 64, 71), k32 = Random(5 * 2 * 64, 72);
  std::vector<uint16_t> q(q32.size()), k(k32.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = F32ToBF16(q32[i]);
  for (size_t i = 0; i < k.size(); ++i) k[i] = F32ToBF16(k32[i]);
  std::vector<uint16_t> q_tab = q, k_tab = k;
  ApplyRopeQK(HeadsView::Contiguous(q.data(), DType::kBF16, 5, 4, 64),
              HeadsView::Contiguous(k.data(), DType::kBF16, 5, 2, 64), positions, RopeOnTheFly::From(f),
              RopeLayout::kHalfSplit);
  ApplyRopeQK(HeadsView::Contiguous(q_tab.data(), DType::kBF16, 5, 4, 64),
              HeadsView::Contiguous(k_tab.data(), DType::kBF16, 5, 2, 64), rows, View(table), RopeLayout::kHalfSplit);
  int64_t same = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const double a = BF16ToF32(q[i]), b = BF16ToF32(q_tab[i]);
    // |p1| + |p2| <= (|x_i| + |x_partner|) * attention_factor <= 2 * attention_factor (inputs in [-1, 1])
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(a), std::fabs(b)) + 1e-30) - 7);
    EXPECT_LE(std::fabs(a - b), 6 * kEps * 2 * f.attention_factor + ulp) << i;
    same += q[i] == q_tab[i];
  }
  EXPECT_GT(same, static_cast<int64_t>(q.size()) * 95 / 100);
  EXPECT_EQ(k.size(), k_tab.size());
  for (size_t i = 0; i < k.size(); ++i) {
    const double a = BF16ToF32(k[i]), b = BF16ToF32(k_tab[i]);
    const double ulp = std::ldexp(1.0, std::ilogb(std::max(std::fabs(a), std::fabs(b)) + 1e-30) - 7);
    EXPECT_LE(std::fabs(a - b), 6 * kEps * 2 * f.attention_factor + ulp) << i;
  }
}

TEST(RopeOnTheFlyApi, RejectsBadInput) {
  const RopeFrequencies f = ComputeRopeFrequencies(Llama());
  std::vector<float> x(2 * 64, 0.5f);
  const HeadsView v = HeadsView::Contiguous(x.data(), 2, 1, 64);
  const RopeOnTheFly fly = RopeOnTheFly::From(f);
  const std::vector<int64_t> ok{0, 1};
  EXPECT_NO_THROW(ApplyRope(v, ok, fly, RopeLayout::kHalfSplit));
  const std::vector<int64_t> too_far{0, int64_t{1} << 29};
  EXPECT_THROW(ApplyRope(v, too_far, fly, RopeLayout::kHalfSplit), RangeError);
  const std::vector<int64_t> too_far_neg{-(int64_t{1} << 29), 0};
  EXPECT_THROW(ApplyRope(v, too_far_neg, fly, RopeLayout::kHalfSplit), RangeError);
  std::vector<float> fast(32, 4.0f);  // angle pos * 4 >= 2^29 rad for pos = 2^27
  const std::vector<int64_t> big_angle{0, int64_t{1} << 27};
  EXPECT_THROW(ApplyRope(v, big_angle, RopeOnTheFly{fast, 1.0, RopePrecision::kExact}, RopeLayout::kHalfSplit),
               RangeError);
  std::vector<float> nan_freq = f.inv_freq;
  nan_freq[3] = std::nanf("");
  EXPECT_THROW(ApplyRope(v, ok, RopeOnTheFly{nan_freq, 1.0, RopePrecision::kExact}, RopeLayout::kHalfSplit),
               ConfigError);
  EXPECT_THROW(ApplyRope(v, ok, RopeOnTheFly{f.inv_freq, INFINITY, RopePrecision::kHf}, RopeLayout::kHalfSplit),
               ConfigError);
  const std::vector<int64_t> one{0};
  EXPECT_THROW(ApplyRope(v, one, fly, RopeLayout::kHalfSplit), ShapeError);
  std::vector<float> wide(64, 0.01f);  // rotary_dim 128 > head_dim 64
  EXPECT_THROW(ApplyRope(v, ok, RopeOnTheFly{wide, 1.0, RopePrecision::kExact}, RopeLayout::kHalfSplit), ShapeError);
  for (float e : x) EXPECT_TRUE(std::isfinite(e));
}

}  // namespace
}  // namespace posenc
