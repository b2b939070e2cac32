// Tests for posenc/pe/sinusoidal.h: the seed's worked numbers, the public bug report on layout and divisor (values from
// tests/data/bug_cases.json), closed forms against a long-double reference, and the relative-position
// properties (shift operator M_k, dot products, layout permutation) on random inputs.
#include "posenc/pe/sinusoidal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "pe/pe_test_util.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using pe_test::BugCase;
using pe_test::ExpectThrowsWith;

// Precision bound of SinusoidalTable (documented in sinusoidal.h), for a value whose exact real value is
// `truth` and whose angle is `angle` radians:
//   half a float32 ulp at truth   (the one rounding to float32)
// + |angle| * 2^-51               (double rounding of omega_i and of p * omega_i)
// + 2^-52                         (libm sin/cos in double, < 1 ulp, and the long-double reference's own error)
double Float32Bound(long double truth, long double angle) {
  const float f = std::fabs(static_cast<float>(truth));
  const double half_ulp = 0.5 * (std::nextafter(f, std::numeric_limits<float>::infinity()) - f);
  return half_ulp + std::fabs(static_cast<double>(angle)) * 0x1p-51 + 0x1p-52;
}

SinusoidalParams Params(int64_t d_model, SinusoidalLayout layout = SinusoidalLayout::kInterleaved,
                        SinusoidalDivisor divisor = SinusoidalDivisor::kHalf, double base = 10000.0) {
  SinusoidalParams p;
  p.d_model = d_model;
  p.base = base;
  p.layout = layout;
  p.divisor = divisor;
  return p;
}

// Reference row in long double (x86-64: 64-bit mantissa), straight from the formula in the header.
std::vector<long double> ReferenceRow(const SinusoidalParams& p, int64_t position,
                                      std::vector<long double>* angles = nullptr) {
  const int64_t half = p.d_model / 2;
  const int64_t divisor = p.divisor == SinusoidalDivisor::kHalf ? half : (half - 1 >= 1 ? half - 1 : 1);
  std::vector<long double> row(static_cast<size_t>(p.d_model));
  if (angles) angles->assign(static_cast<size_t>(p.d_model), 0.0L);
  for (int64_t i = 0; i < half; ++i) {
    const long double omega =
        std::pow(static_cast<long double>(p.base), -static_cast<long double>(i) / static_cast<long double>(divisor));
    const long double a = static_cast<long double>(position) * omega;
    const int64_t s = p.layout == SinusoidalLayout::kInterleaved ? 2 * i : i;
    const int64_t c = p.layout == SinusoidalLayout::kInterleaved ? 2 * i + 1 : half + i;
    row[static_cast<size_t>(s)] = std::sin(a);
    row[static_cast<size_t>(c)] = std::cos(a);
    if (angles) (*angles)[static_cast<size_t>(s)] = (*angles)[static_cast<size_t>(c)] = a;
  }
  return row;
}

const SinusoidalLayout kLayouts[] = {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated};
const SinusoidalDivisor kDivisors[] = {SinusoidalDivisor::kHalf, SinusoidalDivisor::kHalfMinusOne};

// ===== the seed's worked example =========================================================================

// d_model = 4, base 1e4: omega = [1, 10000^-0.5 = 0.01]; PE[p] = [sin p, cos p, sin 0.01p, cos 0.01p].
TEST(Sinusoidal, SeedD4MatchesClosedFormsAndPrintedValues) {
  const std::vector<int64_t> positions = {0, 1, 2};
  const std::vector<float> pe = SinusoidalTable(Params(4), positions);
  ASSERT_EQ(pe.size(), 12u);

  // PE[0] = [0, 1, 0, 1] exactly (sin 0 = 0, cos 0 = 1 are exact in every format).
  EXPECT_EQ(pe[0], 0.0f);
  EXPECT_EQ(pe[1], 1.0f);
  EXPECT_EQ(pe[2], 0.0f);
  EXPECT_EQ(pe[3], 1.0f);

  // Closed forms, within float32 rounding (Float32Bound).
  for (int64_t p : {1, 2}) {
    const long double a0 = p, a1 = 0.01L * p;
    const long double truth[4] = {std::sin(a0), std::cos(a0), std::sin(a1), std::cos(a1)};
    const long double angle[4] = {a0, a0, a1, a1};
    for (int c = 0; c < 4; ++c) {
      EXPECT_NEAR(pe[static_cast<size_t>(4 * p + c)], static_cast<double>(truth[c]), Float32Bound(truth[c], angle[c]))
          << "PE[" << p << "][" << c << "]";
    }
  }

  // The seed's printed values: 3 decimals (|error| <= 5e-4), except 0.9998 (4 decimals, <= 5e-5).
  const double printed1[4] = {0.841, 0.540, 0.010, 1.000};
  const double printed2[4] = {0.909, -0.416, 0.020, 0.9998};
  for (int c = 0; c < 4; ++c) {
    EXPECT_NEAR(pe[static_cast<size_t>(4 + c)], printed1[c], 5e-4) << "PE[1][" << c << "]";
    EXPECT_NEAR(pe[static_cast<size_t>(8 + c)], printed2[c], c == 3 ? 5e-5 : 5e-4) << "PE[2][" << c << "]";
  }
}

TEST(Sinusoidal, FrequenciesAreThePapersGeometricLadder) {
  // d = 8, kHalf: omega_i = 1e4^(-2i/8) = [1, 0.1, 0.01, 0.001]; kHalfMinusOne: 1e4^(-i/3).
  const std::vector<double> paper = SinusoidalFrequencies(Params(8));
  const double expected_paper[4] = {1.0, 0.1, 0.01, 0.001};
  const std::vector<double> fairseq =
      SinusoidalFrequencies(Params(8, SinusoidalLayout::kConcatenated, SinusoidalDivisor::kHalfMinusOne));
  const double expected_fairseq[4] = {1.0, 0.046415888336127788924, 0.0021544346900318837218, 0.0001};
  ASSERT_EQ(paper.size(), 4u);
  ASSERT_EQ(fairseq.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    // std::pow in double: within 1 ulp of the exact value (glibc), so relative 2^-52.
    EXPECT_NEAR(paper[static_cast<size_t>(i)], expected_paper[i], expected_paper[i] * 0x1p-52) << i;
    EXPECT_NEAR(fairseq[static_cast<size_t>(i)], expected_fairseq[i], expected_fairseq[i] * 0x1p-51) << i;
  }
}

// ===== Public bug report: layout, divisor and the d = 2 edge =======================================================

// Expected values in bug_cases.json are rounded to 7 decimals (<= 5e-8); ours add float32 rounding
// (<= 2^-25 for |v| <= 1) and the angle error (<= 3 * 2^-51 here): bound 5e-8 + 2^-25 + 2^-49 ~ 8.0e-8.
constexpr double kBr31Tolerance = 5e-8 + 0x1p-25 + 0x1p-49;

void CheckBr31Variant(const char* variant, SinusoidalLayout layout, SinusoidalDivisor divisor) {
  const nlohmann::json c = BugCase("sinusoidal_layout_and_divisor");
  const int64_t d = c.at("inputs").at("d").get<int64_t>();
  const int64_t pos = c.at("inputs").at("pos").get<int64_t>();
  const double base = c.at("inputs").at("max_period").get<double>();
  const std::vector<double> expected = c.at("expected").at(variant).get<std::vector<double>>();
  ASSERT_EQ(static_cast<int64_t>(expected.size()), d);
  const std::vector<int64_t> positions = {pos};
  const std::vector<float> row = SinusoidalTable(Params(d, layout, divisor, base), positions);
  ASSERT_EQ(row.size(), expected.size());
  for (size_t i = 0; i < row.size(); ++i) {
    EXPECT_NEAR(row[i], expected[i], kBr31Tolerance) << variant << " channel " << i;
  }
}

TEST(PublicBugReports, InterleavedDivHalf) {
  CheckBr31Variant("interleaved_div_half", SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf);
}

TEST(PublicBugReports, ConcatDivHalf) {
  CheckBr31Variant("concat_div_half", SinusoidalLayout::kConcatenated, SinusoidalDivisor::kHalf);
}

TEST(PublicBugReports, ConcatDivHalfMinus1) {
  CheckBr31Variant("concat_div_half_minus_1", SinusoidalLayout::kConcatenated, SinusoidalDivisor::kHalfMinusOne);
}

// d = 2 with the (half - 1) divisor: 0/0 in the buggy code; clamped divisor gives [sin pos, cos pos].
TEST(PublicBugReports, D2DivHalfMinus1IsFinite) {
  const nlohmann::json c = BugCase("sinusoidal_layout_and_divisor");
  const int64_t d = c.at("inputs").at("edge_case").at("d").get<int64_t>();
  ASSERT_EQ(c.at("inputs").at("edge_case").at("variant").get<std::string>(), "concat_div_half_minus_1");
  const int64_t pos = c.at("inputs").at("pos").get<int64_t>();
  const double base = c.at("inputs").at("max_period").get<double>();
  ASSERT_EQ(d, 2);
  const std::vector<int64_t> positions = {pos};
  for (SinusoidalLayout layout : kLayouts) {  // d = 2 has one pair: both layouts are [sin, cos]
    const auto params = Params(d, layout, SinusoidalDivisor::kHalfMinusOne, base);
    EXPECT_EQ(SinusoidalFrequencies(params), std::vector<double>{1.0});
    const std::vector<float> row = SinusoidalTable(params, positions);
    ASSERT_EQ(row.size(), 2u);
    ASSERT_TRUE(std::isfinite(row[0]) && std::isfinite(row[1]));
    const long double a = static_cast<long double>(pos);
    EXPECT_NEAR(row[0], static_cast<double>(std::sin(a)), Float32Bound(std::sin(a), a));
    EXPECT_NEAR(row[1], static_cast<double>(std::cos(a)), Float32Bound(std::cos(a), a));
  }
}

// The report's invariant: PE(p) . PE(q) depends only on p - q (a wrong table lost this banded structure).
// Exact value: sum_i sin(p w_i) sin(q w_i) + cos(p w_i) cos(q w_i) = sum_i cos((p - q) w_i).
// Bound: every float32 entry is within e = 2^-25 + 2^-30 of the truth (|angle| <= 2^21 here), so each
// product is within 2e + e^2 and the dot within d (2e + e^2); the double reference adds <= half * 2^-29.
TEST(PublicBugReports, DotProductDependsOnlyOnDifference) {
  std::mt19937_64 rng(31);
  std::uniform_int_distribution<int64_t> pos_dist(-(int64_t{1} << 20), int64_t{1} << 20);
  for (SinusoidalLayout layout : kLayouts) {
    for (SinusoidalDivisor divisor : kDivisors) {
      for (int64_t d : {2, 8, 64}) {
        const auto params = Params(d, layout, divisor);
        const std::vector<double> omega = SinusoidalFrequencies(params);
        const double e = 0x1p-25 + 0x1p-30;
        const double bound = static_cast<double>(d) * (2 * e + e * e) + static_cast<double>(d / 2) * 0x1p-29;
        for (int trial = 0; trial < 50; ++trial) {
          const int64_t p = pos_dist(rng), q = pos_dist(rng), s = pos_dist(rng);
          const std::vector<int64_t> positions = {p, q, p + s, q + s};
          const std::vector<float> t = SinusoidalTable(params, positions);
          auto dot = [&](int a, int b) {
            double acc = 0;
            for (int64_t c = 0; c < d; ++c) {
              acc += static_cast<double>(t[static_cast<size_t>(a * d + c)]) * t[static_cast<size_t>(b * d + c)];
            }
            return acc;
          };
          double truth = 0;
          for (double w : omega) truth += std::cos(static_cast<double>(p - q) * w);
          EXPECT_NEAR(dot(0, 1), truth, bound) << "d=" << d << " p=" << p << " q=" << q;
          EXPECT_NEAR(dot(2, 3), truth, bound) << "d=" << d << " p+s=" << p + s << " q+s=" << q + s;
        }
      }
    }
  }
}

// ===== closed forms, any position ===========================================================================

// Random positions in [-2^24, 2^24] (negative included), every layout/divisor, against a long-double
// evaluation of the header's formula, within the documented bound (Float32Bound).
TEST(Sinusoidal, MatchesLongDoubleReferenceForAnyPosition) {
  std::mt19937_64 rng(2017);
  std::uniform_int_distribution<int64_t> pos_dist(-(int64_t{1} << 24), int64_t{1} << 24);
  for (SinusoidalLayout layout : kLayouts) {
    for (SinusoidalDivisor divisor : kDivisors) {
      for (int64_t d : {2, 6, 16, 128}) {
        for (double base : {10000.0, 500000.0, 2.5}) {
          const auto params = Params(d, layout, divisor, base);
          std::vector<int64_t> positions = {0, 1, -1, int64_t{1} << 24, -(int64_t{1} << 24)};
          for (int i = 0; i < 20; ++i) positions.push_back(pos_dist(rng));
          const std::vector<float> table = SinusoidalTable(params, positions);
          for (size_t r = 0; r < positions.size(); ++r) {
            std::vector<long double> angles;
            const std::vector<long double> ref = ReferenceRow(params, positions[r], &angles);
            for (int64_t c = 0; c < d; ++c) {
              const size_t k = static_cast<size_t>(c);
              EXPECT_NEAR(table[r * static_cast<size_t>(d) + k], static_cast<double>(ref[k]),
                          Float32Bound(ref[k], angles[k]))
                  << "d=" << d << " base=" << base << " pos=" << positions[r] << " channel " << c;
            }
          }
        }
      }
    }
  }
}

// ===== properties ============================================================================================

// PE(p + k) = M_k PE(p) with one M_k per k, reused for many p. Bound per channel (|p|, |k| <= 2^20):
// PE entries within e = 2^-25 + 2^-30 of the truth, M_k entries within 2^-31 + 2^-53; so M_k PE(p) is
// within sqrt(2) e + 2 * 2^-31 of the true PE(p + k), and PE(p + k) itself within e:
// bound = (1 + sqrt 2) e + 2^-29 (the last term also covers double rounding in the product).
TEST(Sinusoidal, ShiftMatrixMapsPeOfPToPeOfPPlusK) {
  std::mt19937_64 rng(35);
  std::uniform_int_distribution<int64_t> dist(-(int64_t{1} << 20), int64_t{1} << 20);
  const double e = 0x1p-25 + 0x1p-30;
  const double bound = (1.0 + std::sqrt(2.0)) * e + 0x1p-29;
  for (SinusoidalLayout layout : kLayouts) {
    for (SinusoidalDivisor divisor : kDivisors) {
      for (int64_t d : {2, 8, 32}) {
        const auto params = Params(d, layout, divisor);
        const size_t n = static_cast<size_t>(d);
        for (int trial_k = 0; trial_k < 10; ++trial_k) {
          const int64_t k = dist(rng);
          const std::vector<double> m = SinusoidalShiftMatrix(params, k);  // depends on k only
          ASSERT_EQ(m.size(), n * n);
          for (int trial_p = 0; trial_p < 10; ++trial_p) {
            const int64_t p = dist(rng);
            const std::vector<int64_t> positions = {p, p + k};
            const std::vector<float> t = SinusoidalTable(params, positions);
            for (size_t r = 0; r < n; ++r) {
              double shifted = 0;
              for (size_t c = 0; c < n; ++c) shifted += m[r * n + c] * t[c];
              EXPECT_NEAR(shifted, t[n + r], bound) << "d=" << d << " p=" << p << " k=" << k << " ch " << r;
            }
          }
        }
      }
    }
  }
}

// M_k is orthogonal, block-diagonal over (sin, cos) pairs, M_0 = I and M_a M_b = M_{a+b}.
// Entries are cos/sin of angles <= 2^21 rad computed in double (error <= 2^-30 each); a product entry sums
// two such products, so within 2^-28.
TEST(Sinusoidal, ShiftMatrixIsAGroupOfRotations) {
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int64_t> dist(-(int64_t{1} << 20), int64_t{1} << 20);
  for (SinusoidalLayout layout : kLayouts) {
    const auto params = Params(8, layout);
    const size_t n = 8;
    const std::vector<double> identity = SinusoidalShiftMatrix(params, 0);
    for (size_t r = 0; r < n; ++r) {
      for (size_t c = 0; c < n; ++c) EXPECT_EQ(identity[r * n + c], r == c ? 1.0 : 0.0);
    }
    for (int trial = 0; trial < 20; ++trial) {
      const int64_t a = dist(rng), b = dist(rng);
      const std::vector<double> ma = SinusoidalShiftMatrix(params, a);
      const std::vector<double> mb = SinusoidalShiftMatrix(params, b);
      const std::vector<double> mab = SinusoidalShiftMatrix(params, a + b);
      for (size_t r = 0; r < n; ++r) {
        for (size_t c = 0; c < n; ++c) {
          double prod = 0, gram = 0;
          for (size_t j = 0; j < n; ++j) {
            prod += ma[r * n + j] * mb[j * n + c];
            gram += ma[r * n + j] * ma[c * n + j];
          }
          EXPECT_NEAR(prod, mab[r * n + c], 0x1p-28) << "a=" << a << " b=" << b;
          EXPECT_NEAR(gram, r == c ? 1.0 : 0.0, 0x1p-50);
        }
      }
    }
  }
}

// Interleaved and concatenated hold the same numbers: interleaved channel 2i = concatenated channel i,
// interleaved 2i+1 = concatenated half + i. Same double computation, so equal bit for bit.
TEST(Sinusoidal, InterleavedAndConcatenatedArePermutations) {
  std::mt19937_64 rng(1706);
  std::uniform_int_distribution<int64_t> dist(std::numeric_limits<int64_t>::min() / 4,
                                              std::numeric_limits<int64_t>::max() / 4);
  for (SinusoidalDivisor divisor : kDivisors) {
    for (int64_t d : {2, 4, 10, 64}) {
      std::vector<int64_t> positions = {0, 1, -5, 1000000};
      for (int i = 0; i < 30; ++i) positions.push_back(dist(rng));
      const auto a = SinusoidalTable(Params(d, SinusoidalLayout::kInterleaved, divisor), positions);
      const auto b = SinusoidalTable(Params(d, SinusoidalLayout::kConcatenated, divisor), positions);
      const size_t n = static_cast<size_t>(d), half = n / 2;
      for (size_t r = 0; r < positions.size(); ++r) {
        for (size_t i = 0; i < half; ++i) {
          EXPECT_EQ(a[r * n + 2 * i], b[r * n + i]) << "pos " << positions[r] << " pair " << i;
          EXPECT_EQ(a[r * n + 2 * i + 1], b[r * n + half + i]) << "pos " << positions[r] << " pair " << i;
          // Also well-formed for huge |p| (angle error there is large, but values stay in [-1, 1]).
          EXPECT_LE(std::fabs(a[r * n + 2 * i]), 1.0f);
          EXPECT_LE(std::fabs(a[r * n + 2 * i + 1]), 1.0f);
        }
      }
    }
  }
}

// sin is odd and cos even: PE(-p) has the sin channels negated and the cos channels unchanged (exactly:
// the angle -p*w is the exact negation of p*w in double, and libm's sin/cos are symmetric).
TEST(Sinusoidal, NegativePositionsMirror) {
  const auto params = Params(16);
  const std::vector<int64_t> positions = {37, -37};
  const auto t = SinusoidalTable(params, positions);
  for (size_t c = 0; c < 16; ++c) {
    EXPECT_EQ(t[16 + c], c % 2 == 0 ? -t[c] : t[c]) << "channel " << c;
  }
}

// AddSinusoidal rounds PE to float32 then adds: exactly x + SinusoidalTable. Random embeddings, repeated
// and negative positions.
TEST(Sinusoidal, AddEqualsEmbeddingsPlusTable) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);  // inputs only; values are not compared to constants
  for (SinusoidalLayout layout : kLayouts) {
    const auto params = Params(12, layout);
    const std::vector<int64_t> positions = {5, 0, 5, -3, 4096};
    std::vector<float> x(positions.size() * 12);
    for (float& v : x) v = normal(rng);
    const std::vector<float> x0 = x;
    AddSinusoidal(params, positions, x);
    const std::vector<float> table = SinusoidalTable(params, positions);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(x[i], x0[i] + table[i]) << i;
  }
  // And on zero embeddings it is the closed form: x[0] = [sin 1, cos 1] for d = 2, position 1.
  std::vector<float> zero(2, 0.0f);
  const std::vector<int64_t> one = {1};
  AddSinusoidal(Params(2), one, zero);
  EXPECT_NEAR(zero[0], static_cast<double>(std::sin(1.0L)), Float32Bound(std::sin(1.0L), 1.0L));
  EXPECT_NEAR(zero[1], static_cast<double>(std::cos(1.0L)), Float32Bound(std::cos(1.0L), 1.0L));
}

// ===== errors ================================================================================================

TEST(SinusoidalErrors, OddDModelSaysWhy) {
  const std::vector<int64_t> positions = {0};
  ExpectThrowsWith<ConfigError>([&] { SinusoidalTable(Params(5), positions); },
                                {"d_model", "even", "(sin, cos) pairs", "got 5"});
  ExpectThrowsWith<ConfigError>([&] { SinusoidalShiftMatrix(Params(3), 1); }, {"d_model", "got 3"});
}

TEST(SinusoidalErrors, DModelBelowTwo) {
  ExpectThrowsWith<ConfigError>([] { ValidateSinusoidalParams(Params(0)); }, {"d_model must be >= 2", "got 0"});
  ExpectThrowsWith<ConfigError>([] { ValidateSinusoidalParams(Params(-4)); }, {"d_model", "got -4"});
}

TEST(SinusoidalErrors, BaseMustBeFiniteAndAboveOne) {
  for (double base : {1.0, 0.5, 0.0, -10.0}) {
    ExpectThrowsWith<ConfigError>(
        [&] { SinusoidalFrequencies(Params(4, SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf, base)); },
        {"base", "> 1", "got"});
  }
  ExpectThrowsWith<ConfigError>(
      [] {
        SinusoidalFrequencies(Params(4, SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf,
                                     std::numeric_limits<double>::quiet_NaN()));
      },
      {"base", "got nan"});
  ExpectThrowsWith<ConfigError>(
      [] {
        SinusoidalFrequencies(Params(4, SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf,
                                     std::numeric_limits<double>::infinity()));
      },
      {"base", "got inf"});
}

TEST(SinusoidalErrors, WrongOutputSizeIsShapeErrorAndWritesNothing) {
  const std::vector<int64_t> positions = {0, 1, 2};
  std::vector<float> out(11, -7.0f);
  ExpectThrowsWith<ShapeError>([&] { SinusoidalTable(Params(4), positions, out); }, {"out has 11 floats", "3 * 4"});
  for (float v : out) EXPECT_EQ(v, -7.0f);
  std::vector<float> x(13, 2.0f);
  ExpectThrowsWith<ShapeError>([&] { AddSinusoidal(Params(4), positions, x); }, {"x has 13 floats", "3 * 4"});
  for (float v : x) EXPECT_EQ(v, 2.0f);
}

}  // namespace
}  // namespace posenc
