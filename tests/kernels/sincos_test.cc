// On-the-fly RoPE cos/sin (kernels/sincos.h): the Highway SinCosRow against its scalar twin (bit for bit, once
// per target this CPU runs), against the true value (long double) and against posenc's tables
// (ComputeCosSin), over the inv_freq of every example config (default, linear, dynamic NTK, yarn with
// attention_factor, llama3, longrope short and long, partial rotary), every position in [0, 2^16), random
// positions up to 2^28 (both signs) and positions whose angle lies next to a multiple of pi/2.
//
// Tolerances (derived in sincos.h): the float64 cos/sin are within 2^-31 relative of the truth, so every
// kExact output is within (1/2 + 2^-7) ulp of the true cos(inv_freq * pos) * attention_factor; both it and
// ComputeCosSin(kExact) round a value that close to the truth, so they differ by at most 1 ulp. kHf: fl32(cos)
// of the float32 angle likewise (within 1 ulp of ComputeCosSin(kHf, kApart)); the folded value is a float32
// product with fl32(attention_factor) in [1, 2), so a 1-ulp difference becomes at most 2 ulp.
// The long double reference: the angle inv_freq * pos (24 + 29 bits) is exact in its 64-bit significand, and
// glibc's cosl/sinl are within about 1 ulp of long double (2^-63 relative), far below the bound.
#include "posenc/kernels/sincos.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <tuple>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/tests/hwy_gtest.h"
#include "posenc/rope/hf_config.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "test_util.h"

// At global scope: Highway's instantiation macro names `testing::` unqualified, which inside namespace posenc
// would find posenc::testing (test_util.h) instead of GoogleTest's.
class SinCosTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(SinCosTest);

namespace posenc::kernels {
namespace {
using posenc::testing::UlpDistance;

constexpr double kMaxUlpFromTruth = 0.5 + 0x1p-7;  // sincos.h: 0.5 (rounding) + 2^-31 * 2^24

struct NamedFreqs {
  std::string name;
  RopeFrequencies freqs;
};

// The frequency tables of examples/configs (plus longrope's long factors and dynamic NTK past its length).
const std::vector<NamedFreqs>& ExampleFrequencies() {
  static const std::vector<NamedFreqs> all = [] {
    std::vector<NamedFreqs> v;
    for (const char* name : {"llama2-7b", "llama3-8b", "llama3.1-8b", "deepseek-v3", "dynamic-ntk-2-llama2dims",
                             "linear-8-llama2dims", "phi-3-mini-128k-instruct", "pythia-410m-gpt-neox",
                             "qwen2.5-7b-instruct-yarn4"}) {
      const HfRopeConfig cfg =
          LoadHfRopeConfig(std::string(POSENC_SOURCE_DIR) + "/examples/configs/" + name + ".json");
      v.push_back({name, ComputeRopeFrequencies(cfg.params)});
      if (cfg.params.max_position_embeddings > 0 &&
          (std::string(name) == "phi-3-mini-128k-instruct" || std::string(name) == "dynamic-ntk-2-llama2dims")) {
        v.push_back({std::string(name) + "@long",
                     ComputeRopeFrequencies(cfg.params, 2 * cfg.params.max_position_embeddings)});
      }
    }
    return v;
  }();
  return all;
}

// float32 ulp at the magnitude of the true value x (normal range: RoPE's cos/sin are never subnormal here).
double UlpAt(long double x) {
  int e = 0;
  std::frexp(static_cast<double>(std::fabs(x)), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, -126) - 23);
}

// Checks one row of SinCosRow(kExact) against the truth; returns "" or the first violation. long_double: the
// truth from cosl/sinl; otherwise from glibc's float64 cos/sin of the same exact angle (within 1 float64 ulp,
// 2^-52 relative, 2^-28 of a float32 ulp: added to the bound).
std::string CheckExactRow(const std::vector<float>& inv, int64_t pos, double af, const float* c, const float* s,
                          bool long_double = true) {
  for (size_t i = 0; i < inv.size(); ++i) {
    long double tc, ts;
    if (long_double) {
      const long double a = static_cast<long double>(inv[i]) * static_cast<long double>(pos);  // exact
      tc = cosl(a) * static_cast<long double>(af);
      ts = sinl(a) * static_cast<long double>(af);
    } else {
      const double a = static_cast<double>(inv[i]) * static_cast<double>(pos);  // exact (|pos| < 2^29)
      tc = static_cast<long double>(std::cos(a)) * af;
      ts = static_cast<long double>(std::sin(a)) * af;
    }
    const double slack = long_double ? 0.0 : 0x1p-28;
    for (const auto& [got, truth, what] : {std::tuple{c[i], tc, "cos"}, std::tuple{s[i], ts, "sin"}}) {
      const double err = static_cast<double>(std::fabs(static_cast<long double>(got) - truth));
      if (!(err <= (kMaxUlpFromTruth + slack) * UlpAt(truth))) {
        return std::string(what) + " pos " + std::to_string(pos) + " pair " + std::to_string(i) + ": got " +
               std::to_string(got) + ", true " + std::to_string(static_cast<double>(truth)) + ", error " +
               std::to_string(err / UlpAt(truth)) + " ulp";
      }
    }
  }
  return "";
}

// Positions of the large-range tests: every one in [0, 2^16), 1024 random ones in (2^16, 2^28) and their
// negatives.
std::vector<int64_t> WidePositions() {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < (int64_t{1} << 16); ++i) p.push_back(i);
  std::mt19937_64 rng(2718);
  std::uniform_int_distribution<int64_t> big(int64_t{1} << 16, int64_t{1} << 28);
  for (int i = 0; i < 1024; ++i) {
    const int64_t x = big(rng);
    p.push_back(x);
    p.push_back(-x);
  }
  p.push_back((int64_t{1} << 28) - 1);
  return p;
}


TEST_P(SinCosTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(SinCosTargetName(), hwy::TargetName(GetParam()));
}

// Every operation is a separately rounded float64 (or, for kHf's angle and scale, float32) one, so each target
// gives the scalar twin's bits: random frequencies over 12 decades, lengths around every vector width, both
// precisions, attention factors 1 and 1.3, positions of both signs up to 2^28.
TEST_P(SinCosTest, MatchesScalarTwinBitwise) {
  std::mt19937_64 rng(99 + static_cast<uint64_t>(GetParam()));
  std::uniform_real_distribution<double> log_f(-27.0, 0.0);
  std::uniform_int_distribution<int64_t> pos_d(-(int64_t{1} << 28), int64_t{1} << 28);
  int failures = 0;
  for (int64_t n : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 32, 64, 67}) {
    for (int rep = 0; rep < 40; ++rep) {
      std::vector<float> inv(static_cast<size_t>(n));
      for (float& f : inv) f = static_cast<float>(std::exp2(log_f(rng)));
      const int64_t pos = rep == 0 ? 0 : rep == 1 ? (int64_t{1} << 29) - 1 : pos_d(rng);
      for (RopePrecision prec : {RopePrecision::kExact, RopePrecision::kHf}) {
        for (double af : {1.0, 1.3}) {
          std::vector<float> c(inv.size()), s(inv.size()), cr(inv.size()), sr(inv.size());
          SinCosRow(inv.data(), n, pos, af, prec, c.data(), s.data());
          SinCosRowScalar(inv.data(), n, pos, af, prec, cr.data(), sr.data());
          if ((std::memcmp(c.data(), cr.data(), c.size() * 4) != 0 ||
               std::memcmp(s.data(), sr.data(), s.size() * 4) != 0) &&
              failures++ < 5) {
            ADD_FAILURE() << "n=" << n << " pos=" << pos << " precision " << RopePrecisionName(prec) << " af "
                          << af;
          }
        }
      }
    }
  }
}

// kExact: within (1/2 + 2^-7) ulp of the true value and within 1 ulp of ComputeCosSin(kExact), folded and
// apart, for every example config and every wide position.
TEST(SinCos, ExactWithinHalfUlpOfTruthAndOneUlpOfTable) {
  const std::vector<int64_t> positions = WidePositions();
  for (const NamedFreqs& nf : ExampleFrequencies()) {
    const std::vector<float>& inv = nf.freqs.inv_freq;
    const int64_t half = static_cast<int64_t>(inv.size());
    const CosSinTable table = ComputeCosSin(nf.freqs, positions, RopePrecision::kExact, AttentionFold::kFolded);
    std::vector<float> c(inv.size()), s(inv.size());
    int64_t differ = 0;
    for (size_t t = 0; t < positions.size(); ++t) {
      SinCosRow(inv.data(), half, positions[t], nf.freqs.attention_factor, RopePrecision::kExact, c.data(),
                s.data());
      // float64 truth everywhere, long double on every 61st position (an independent check of glibc's).
      const std::string err =
          CheckExactRow(inv, positions[t], nf.freqs.attention_factor, c.data(), s.data(), t % 61 == 0);
      ASSERT_EQ(err, "") << nf.name;
      for (int64_t i = 0; i < half; ++i) {
        const float tc = table.cos[t * half + i], ts = table.sin[t * half + i];
        ASSERT_LE(UlpDistance(c[i], tc), 1) << nf.name << " pos " << positions[t] << " pair " << i;
        ASSERT_LE(UlpDistance(s[i], ts), 1) << nf.name << " pos " << positions[t] << " pair " << i;
        differ += (c[i] != tc) + (s[i] != ts);
      }
    }
    // Rounding differs from glibc's only next to a rounding boundary: rare.
    EXPECT_LT(differ, static_cast<int64_t>(positions.size()) * half / 1000) << nf.name;
    // Apart: the plain cos/sin.
    const CosSinTable apart = ComputeCosSin(nf.freqs, positions, RopePrecision::kExact, AttentionFold::kApart);
    for (size_t t = 0; t < positions.size(); t += 7) {
      SinCosRow(inv.data(), half, positions[t], 1.0, RopePrecision::kExact, c.data(), s.data());
      for (int64_t i = 0; i < half; ++i) {
        ASSERT_LE(UlpDistance(c[i], apart.cos[t * half + i]), 1) << nf.name << " pos " << positions[t];
        ASSERT_LE(UlpDistance(s[i], apart.sin[t * half + i]), 1) << nf.name << " pos " << positions[t];
      }
    }
  }
}

// kHf: fl32(cos) of HF's float32 angle within (1/2 + 2^-7) ulp of its true cos and within 1 ulp of
// ComputeCosSin(kHf, kApart); with the attention factor folded (a float32 product), within 2 ulp. Every 3rd
// wide position (the float32 angle's reduction is the same code as kExact's, checked on all of them).
TEST(SinCos, HfWithinOneUlpOfTable) {
  std::vector<int64_t> positions;
  const std::vector<int64_t> wide = WidePositions();
  for (size_t t = 0; t < wide.size(); t += 3) positions.push_back(wide[t]);
  for (const NamedFreqs& nf : ExampleFrequencies()) {
    const std::vector<float>& inv = nf.freqs.inv_freq;
    const int64_t half = static_cast<int64_t>(inv.size());
    const CosSinTable apart = ComputeCosSin(nf.freqs, positions, RopePrecision::kHf, AttentionFold::kApart);
    const CosSinTable folded = ComputeCosSin(nf.freqs, positions, RopePrecision::kHf, AttentionFold::kFolded);
    std::vector<float> c(inv.size()), s(inv.size());
    for (size_t t = 0; t < positions.size(); ++t) {
      SinCosRow(inv.data(), half, positions[t], 1.0, RopePrecision::kHf, c.data(), s.data());
      const float pos_f = static_cast<float>(positions[t]);
      for (int64_t i = 0; i < half; ++i) {
        const double angle = static_cast<double>(inv[i] * pos_f);  // HF's float32 angle
        // glibc float64 truth (2^-28 float32 ulp of slack, see CheckExactRow)
        for (const auto& [got, truth] : {std::pair{c[i], std::cos(angle)}, std::pair{s[i], std::sin(angle)}}) {
          ASSERT_LE(std::fabs(static_cast<double>(got) - truth), (kMaxUlpFromTruth + 0x1p-28) * UlpAt(truth))
              << nf.name << " pos " << positions[t] << " pair " << i;
        }
        ASSERT_LE(UlpDistance(c[i], apart.cos[t * half + i]), 1) << nf.name << " pos " << positions[t];
        ASSERT_LE(UlpDistance(s[i], apart.sin[t * half + i]), 1) << nf.name << " pos " << positions[t];
      }
      SinCosRow(inv.data(), half, positions[t], nf.freqs.attention_factor, RopePrecision::kHf, c.data(),
                s.data());
      for (int64_t i = 0; i < half; ++i) {
        ASSERT_LE(UlpDistance(c[i], folded.cos[t * half + i]), 2) << nf.name << " pos " << positions[t];
        ASSERT_LE(UlpDistance(s[i], folded.sin[t * half + i]), 2) << nf.name << " pos " << positions[t];
      }
    }
  }
}

// Angles next to a multiple of pi/2 (the hard case of argument reduction: a tiny cos or sin must keep its
// relative accuracy). For each frequency f, the continued-fraction convergents p/q of (pi/2)/f give the
// positions p < 2^28 whose angle p f is closest to q pi/2; p - 1, p + 1 and -p are checked too. Synthetic
// frequencies fl32(pi/2) / 2^j put a tiny result at small positions. Within (1/2 + 2^-7) ulp of the truth.
TEST(SinCos, ExactNearMultiplesOfHalfPi) {
  std::vector<float> freqs;
  for (const NamedFreqs& nf : ExampleFrequencies()) {
    freqs.insert(freqs.end(), nf.freqs.inv_freq.begin(), nf.freqs.inv_freq.end());
  }
  for (int j = 0; j < 24; ++j) freqs.push_back(std::ldexp(static_cast<float>(M_PI / 2), -j));
  const long double half_pi = 1.57079632679489661923132169163975144L;
  long double smallest = 1;
  int64_t checked = 0;
  for (float f : freqs) {
    // Convergents of x = (pi/2) / f: p/q -> x, so p f - q pi/2 -> 0.
    long double x = half_pi / static_cast<long double>(f);
    long double p0 = 1, q0 = 0, p1 = std::floor(x), q1 = 1;
    long double frac = x - std::floor(x);
    for (int it = 0; it < 40 && p1 < 0x1p28L && frac > 0x1p-60L; ++it) {
      for (int64_t d : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        for (int64_t sign : {int64_t{1}, int64_t{-1}}) {
          const int64_t pos = sign * (static_cast<int64_t>(p1) + d);
          float c, s;
          SinCosRow(&f, 1, pos, 1.0, RopePrecision::kExact, &c, &s);
          const std::vector<float> one{f};
          ASSERT_EQ(CheckExactRow(one, pos, 1.0, &c, &s), "") << "f " << f;
          smallest = std::min(smallest, std::min(std::fabs(cosl(static_cast<long double>(f) * pos)),
                                                 std::fabs(sinl(static_cast<long double>(f) * pos))));
          ++checked;
        }
      }
      const long double inv_frac = 1 / frac;
      const long double a = std::floor(inv_frac);
      frac = inv_frac - a;
      const long double p2 = a * p1 + p0, q2 = a * q1 + q0;
      p0 = p1, q0 = q1, p1 = p2, q1 = q2;
    }
  }
  EXPECT_GT(checked, 1000);
  EXPECT_LT(smallest, 1e-9L);  // the test reached results far below float32's epsilon
}

// Negative positions rotate backwards: cos(-p) has cos(p)'s bits and sin(-p) the negated bits (the reduction is
// symmetric under round-to-nearest-even), in both precisions.
TEST(SinCos, NegativePositionsAreMirrorImages) {
  const std::vector<float>& inv = ExampleFrequencies().front().freqs.inv_freq;
  const int64_t half = static_cast<int64_t>(inv.size());
  std::mt19937_64 rng(5);
  std::uniform_int_distribution<int64_t> pos_d(1, int64_t{1} << 28);
  std::vector<float> c(inv.size()), s(inv.size()), cn(inv.size()), sn(inv.size());
  for (RopePrecision prec : {RopePrecision::kExact, RopePrecision::kHf}) {
    for (int rep = 0; rep < 2000; ++rep) {
      const int64_t pos = rep < 1000 ? rep : pos_d(rng);
      SinCosRow(inv.data(), half, pos, 1.1, prec, c.data(), s.data());
      SinCosRow(inv.data(), half, -pos, 1.1, prec, cn.data(), sn.data());
      for (int64_t i = 0; i < half; ++i) {
        ASSERT_EQ(c[i], cn[i]) << pos << " " << i;
        ASSERT_EQ(s[i], -sn[i]) << pos << " " << i;
      }
    }
  }
}

}  // namespace
}  // namespace posenc::kernels
