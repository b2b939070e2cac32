// The Highway RoPE kernel (RopeKernelSimd / RopeKernelQK) against the scalar reference RopeKernelScalar, once
// per Highway target this CPU supports (AVX3 where the CPU has AVX-512, AVX2, SSE4, SSSE3, SCALAR): both
// layouts, float32 / bfloat16 / float16, forward / backward / inverse, partial rotary, half = 1..64, small
// heads several per vector, odd strides, unaligned and negative-stride views, Q and K in one pass, threads.
//
// Tolerance (derived in rope_kernels.h): with p1, p2 the two products forming an output (a c and b s for the
// first member of a pair, a s and b c for the second), u = 2^-24,
//   |simd - scalar| <= 3u (|p1| + |p2|)                   kForward, kBackward
//   |simd - scalar| <= 6u (|p1| + |p2|) / (c^2 + s^2)     kInverse
// in float32 (MulAdd fuses on AVX2/AVX3: one product is rounded once instead of twice), plus one unit of the
// storage format for bfloat16/float16 where the two float32 values round to different neighbours. A second
// test uses inputs whose products and sums are exact in float32, so every target must then match the scalar
// reference bit for bit, which pins the single round-to-nearest-even of bfloat16/float16 stores.
// Everything outside the rotated channels (pass-through channels, padding between heads and tokens, guard
// elements before and after, seeded with NaN/infinity bit patterns) must stay bit-identical.
#include "posenc/kernels/rope_kernels.h"
#include "posenc/rope/layout.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "hwy/tests/hwy_gtest.h"
#include "posenc/core/dtype.h"
#include "posenc/kernels/sincos.h"
#include "posenc/rope/cos_sin.h"

namespace posenc::kernels {
namespace {

constexpr double kU = 0x1p-24;  // float32 unit roundoff

struct Case {
  RopeLayout layout = RopeLayout::kHalfSplit;
  DType dtype = DType::kF32;
  RopeDirection direction = RopeDirection::kForward;
  int64_t half = 4;
  int64_t head_dim = 8;
  int64_t n_tokens = 3;
  int64_t n_heads = 5;
  int64_t token_stride = 0;   // elements; 0: n_heads * head_stride (contiguous tokens)
  int64_t head_stride = 0;    // elements; 0: head_dim (contiguous heads)
  int64_t offset = 1;         // elements before the first one (1: unaligned)
  bool exact_inputs = false;  // values j/128 and coefficients k/128: every float32 result exact

  std::string Describe() const {
    return std::string(RopeLayoutName(layout)) + " " + std::string(DTypeName(dtype)) +
           " dir=" + std::to_string(static_cast<int>(direction)) + " half=" + std::to_string(half) +
           " head_dim=" + std::to_string(head_dim) + " tokens=" + std::to_string(n_tokens) +
           " heads=" + std::to_string(n_heads) + " token_stride=" + std::to_string(token_stride) +
           " head_stride=" + std::to_string(head_stride) + " offset=" + std::to_string(offset);
  }
};

float Load(DType t, const std::vector<uint8_t>& buf, int64_t i) {
  if (t == DType::kF32) {
    float f;
    std::memcpy(&f, buf.data() + i * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, buf.data() + i * 2, 2);
  return t == DType::kBF16 ? BF16ToF32(h) : F16ToF32(h);
}

void Store(DType t, std::vector<uint8_t>& buf, int64_t i, float v) {
  if (t == DType::kF32) {
    std::memcpy(buf.data() + i * 4, &v, 4);
    return;
  }
  const uint16_t h = t == DType::kBF16 ? F32ToBF16(v) : F32ToF16(v);
  std::memcpy(buf.data() + i * 2, &h, 2);
}

// Spacing of the storage format at |x| (0 for float32: the float32 bound already covers the final rounding).
double StorageUlp(DType t, double x) {
  if (t == DType::kF32) return 0.0;
  const int mant = t == DType::kBF16 ? 7 : 10;
  const int min_exp = t == DType::kBF16 ? -126 : -14;
  int e = 0;
  std::frexp(std::fabs(x), &e);
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mant);
}

// A NaN / infinity bit pattern of the storage type (signalling NaN included: it must not be quietened).
void StoreSpecial(DType t, std::vector<uint8_t>& buf, int64_t i, int which) {
  if (t == DType::kF32) {
    const uint32_t bits[3] = {0x7fa00001u, 0xff800000u, 0x7fc00000u};
    std::memcpy(buf.data() + i * 4, &bits[which % 3], 4);
  } else {
    const uint16_t bits16[3] = {t == DType::kBF16 ? uint16_t{0x7f81} : uint16_t{0x7d01}, 0xfc00,
                                t == DType::kBF16 ? uint16_t{0x7fc0} : uint16_t{0x7e00}};
    std::memcpy(buf.data() + i * 2, &bits16[which % 3], 2);
  }
}

struct Table {
  std::vector<float> cos, sin;  // [n_rows, half]
  int64_t n_rows = 0;
};

Table MakeTable(int64_t n_rows, int64_t half, bool exact, std::mt19937_64& rng) {
  Table tb;
  tb.n_rows = n_rows;
  tb.cos.resize(static_cast<size_t>(n_rows * half));
  tb.sin.resize(tb.cos.size());
  std::uniform_real_distribution<double> angle(-3.2, 3.2);
  std::uniform_int_distribution<int> k(-128, 128);
  for (size_t i = 0; i < tb.cos.size(); ++i) {
    if (exact) {
      tb.cos[i] = static_cast<float>(k(rng)) / 128.0f;
      tb.sin[i] = static_cast<float>(k(rng)) / 128.0f;
      if (tb.cos[i] == 0 && tb.sin[i] == 0) tb.cos[i] = 1;
    } else {
      const double th = angle(rng);
      tb.cos[i] = static_cast<float>(1.1 * std::cos(th));  // attention_factor 1.1 folded in: inverse != backward
      tb.sin[i] = static_cast<float>(1.1 * std::sin(th));
    }
  }
  return tb;
}

// One view inside a guarded buffer, its reference and SIMD copies, and the kernel arguments for each.
struct View {
  Case c;
  int64_t ts = 0, hs = 0, base = 0, size = 0;
  std::vector<uint8_t> orig, ref, simd;
  std::vector<int64_t> rows;

  int64_t Index(int64_t t, int64_t h, int64_t d) const { return base + t * ts + h * hs + d; }

  RopeKernelArgs Args(std::vector<uint8_t>& buf, const Table& tb) const {
    return {buf.data() + base * DTypeSize(c.dtype),
            c.dtype,
            c.n_tokens,
            c.n_heads,
            ts,
            hs,
            rows.data(),
            tb.cos.data(),
            tb.sin.data(),
            c.half,
            c.layout,
            c.direction};
  }
};

View MakeView(const Case& c, const Table& tb, std::mt19937_64& rng) {
  View v;
  v.c = c;
  v.hs = c.head_stride != 0 ? c.head_stride : c.head_dim;
  v.ts = c.token_stride != 0 ? c.token_stride : c.n_heads * std::abs(v.hs);
  int64_t lo = 0, hi = 0;  // extreme element offsets relative to the view's data pointer
  for (int64_t t : {int64_t{0}, std::max<int64_t>(c.n_tokens, 1) - 1}) {
    for (int64_t h : {int64_t{0}, std::max<int64_t>(c.n_heads, 1) - 1}) {
      lo = std::min(lo, t * v.ts + h * v.hs);
      hi = std::max(hi, t * v.ts + h * v.hs + c.head_dim - 1);
    }
  }
  v.base = c.offset - lo;
  v.size = v.base + hi + 1 + 9;  // 9 guard elements after
  const int64_t es = DTypeSize(c.dtype);
  v.orig.assign(static_cast<size_t>(v.size * es), 0);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> j(-128, 128);
  std::uniform_int_distribution<int> pick(0, 7);
  for (int64_t i = 0; i < v.size; ++i) {
    if (pick(rng) == 0) {
      StoreSpecial(c.dtype, v.orig, i, pick(rng));  // overwritten below where the element is rotated
    } else {
      Store(c.dtype, v.orig, i, c.exact_inputs ? static_cast<float>(j(rng)) / 128.0f : u(rng));
    }
  }
  // Rotated channels get finite values.
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    for (int64_t h = 0; h < c.n_heads; ++h) {
      for (int64_t d = 0; d < 2 * c.half; ++d) {
        Store(c.dtype, v.orig, v.Index(t, h, d), c.exact_inputs ? static_cast<float>(j(rng)) / 128.0f : u(rng));
      }
    }
  }
  std::uniform_int_distribution<int64_t> row(0, tb.n_rows - 1);
  for (int64_t t = 0; t < c.n_tokens; ++t) v.rows.push_back(row(rng));
  v.ref = v.orig;
  v.simd = v.orig;
  return v;
}

// Compares v.simd with v.ref element by element; returns "" or the first violation. bitwise: rotated
// channels must match exactly too.
std::string Compare(const View& v, const Table& tb, bool bitwise = false) {
  const Case& c = v.c;
  const int64_t es = DTypeSize(c.dtype);
  std::vector<char> rotated(static_cast<size_t>(v.size), 0);
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const float* cs = tb.cos.data() + v.rows[t] * c.half;
    const float* sn = tb.sin.data() + v.rows[t] * c.half;
    for (int64_t h = 0; h < c.n_heads; ++h) {
      for (int64_t i = 0; i < c.half; ++i) {
        const bool il = c.layout == RopeLayout::kInterleaved;
        const int64_t ia = v.Index(t, h, il ? 2 * i : i), ib = v.Index(t, h, il ? 2 * i + 1 : i + c.half);
        const double a = Load(c.dtype, v.orig, ia), b = Load(c.dtype, v.orig, ib);
        const double cc = cs[i], ss = sn[i];
        const bool inverse = c.direction == RopeDirection::kInverse;
        const double scale = inverse ? 1.0 / (cc * cc + ss * ss) : 1.0;
        const double k = c.exact_inputs ? 0.0 : (inverse ? 6.0 : 3.0);
        const double m_a = (std::fabs(a * cc) + std::fabs(b * ss)) * scale;
        const double m_b = (std::fabs(a * ss) + std::fabs(b * cc)) * scale;
        for (const auto& [e, m] : {std::pair{ia, m_a}, std::pair{ib, m_b}}) {
          rotated[static_cast<size_t>(e)] = 1;
          const double g = Load(c.dtype, v.simd, e), r = Load(c.dtype, v.ref, e);
          const double bound =
              c.exact_inputs || bitwise
                  ? 0.0
                  : k * kU * m * (1 + 1e-6) + 0x1p-148 + StorageUlp(c.dtype, std::max(std::fabs(g), std::fabs(r)));
          const bool same_bits = std::memcmp(v.simd.data() + e * es, v.ref.data() + e * es, es) == 0;
          if (!same_bits && !(std::fabs(g - r) <= bound)) {
            return "token " + std::to_string(t) + " head " + std::to_string(h) + " pair " + std::to_string(i) +
                   ": simd " + std::to_string(g) + " vs scalar " + std::to_string(r) + " (bound " +
                   std::to_string(bound) + ", a=" + std::to_string(a) + " b=" + std::to_string(b) + ")";
          }
        }
      }
    }
  }
  for (int64_t e = 0; e < v.size; ++e) {
    if (rotated[static_cast<size_t>(e)]) continue;
    if (std::memcmp(v.simd.data() + e * es, v.orig.data() + e * es, es) != 0) {
      return "element " + std::to_string(e) + " outside the rotated channels was written";
    }
  }
  return "";
}

// Targets without fused multiply-add round both products, as the scalar reference does.
bool RoundsBothProducts(int64_t target) { return (target & (HWY_SSE4 | HWY_SSSE3 | HWY_SCALAR)) != 0; }

// Runs scalar and SIMD on one case; returns "" or a failure description. bitwise: see Compare.
std::string RunCase(const Case& c, std::mt19937_64& rng, bool bitwise = false) {
  const Table tb = MakeTable(7, c.half, c.exact_inputs, rng);
  View v = MakeView(c, tb, rng);
  RopeKernelScalar(v.Args(v.ref, tb));
  RopeKernelSimd(v.Args(v.simd, tb));
  const std::string err = Compare(v, tb, bitwise);
  return err.empty() ? err : c.Describe() + ": " + err;
}

class RopeKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(RopeKernelTest);

const RopeLayout kLayouts[] = {RopeLayout::kHalfSplit, RopeLayout::kInterleaved};
const DType kDTypes[] = {DType::kF32, DType::kBF16, DType::kF16};
const RopeDirection kDirections[] = {RopeDirection::kForward, RopeDirection::kBackward, RopeDirection::kInverse};
// 4: stories260K (head_dim 8); 8: GPT-NeoX rotary 16; 1..3: below every vector width; 17: odd tails.
const int64_t kHalves[] = {1, 2, 3, 4, 8, 17, 32, 64};

TEST_P(RopeKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(RopeKernelTargetName(), hwy::TargetName(GetParam()));
}

// Full and partial rotary, contiguous (small heads several per vector) and padded heads, odd token strides,
// unaligned starts, every layout / dtype / direction. Within the derived bound on AVX2/AVX3; bit-identical
// for kForward/kBackward on SSE4/SSSE3/SCALAR, which round both products like the reference.
TEST_P(RopeKernelTest, MatchesScalarReference) {
  std::mt19937_64 rng(12345 + static_cast<uint64_t>(GetParam()));
  int failures = 0;
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      for (RopeDirection dir : kDirections) {
        for (int64_t half : kHalves) {
          for (int shape = 0; shape < 4; ++shape) {
            Case c;
            c.layout = layout;
            c.dtype = dtype;
            c.direction = dir;
            c.half = half;
            switch (shape) {
              case 0:  // contiguous, fully rotated: several heads per vector when 2*half <= lanes
                c.head_dim = 2 * half, c.n_tokens = 3, c.n_heads = 9, c.offset = 0;
                break;
              case 1:  // contiguous, fully rotated, unaligned, heads not a multiple of any vector
                c.head_dim = 2 * half, c.n_tokens = 2, c.n_heads = 7, c.offset = 3;
                break;
              case 2:  // partial rotary (5 pass-through channels), contiguous
                c.head_dim = 2 * half + 5, c.n_tokens = 4, c.n_heads = 3, c.offset = 1;
                break;
              case 3:  // partial rotary, padded heads (odd head stride) and tokens (odd token stride)
                c.head_dim = 2 * half + 1, c.n_tokens = 3, c.n_heads = 4, c.head_stride = 2 * half + 4,
                c.token_stride = 4 * (2 * half + 4) + 3, c.offset = 5;
                break;
            }
            // Without FMA, kForward/kBackward round exactly as the reference: bit-identical.
            const bool bitwise = RoundsBothProducts(GetParam()) && dir != RopeDirection::kInverse;
            const std::string err = RunCase(c, rng, bitwise);
            if (!err.empty() && failures++ < 5) ADD_FAILURE() << err;
          }
        }
      }
    }
  }
}

// Products and sums exact in float32: every target must equal the scalar reference bit for bit, which pins
// the one round-to-nearest-even (ties included) of the bfloat16 and float16 stores.
TEST_P(RopeKernelTest, BitExactWhereFloat32IsExact) {
  std::mt19937_64 rng(777 + static_cast<uint64_t>(GetParam()));
  int failures = 0;
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      for (RopeDirection dir : {RopeDirection::kForward, RopeDirection::kBackward}) {
        for (int64_t half : kHalves) {
          Case c;
          c.layout = layout, c.dtype = dtype, c.direction = dir, c.half = half;
          c.head_dim = 2 * half, c.n_tokens = 16, c.n_heads = 8, c.offset = 1, c.exact_inputs = true;
          std::string err = RunCase(c, rng);
          c.head_dim = 2 * half + 3, c.offset = 2;
          if (err.empty()) err = RunCase(c, rng);
          if (!err.empty() && failures++ < 5) ADD_FAILURE() << err;
        }
      }
    }
  }
}

// The same pairs in either layout give the same bits on every target (each output fuses its own element's
// product with c and rounds the partner's product with s, in both layouts and in the several-heads-per-vector
// path), so switching layout never changes a model's numbers.
TEST_P(RopeKernelTest, LayoutsAgreeBitwise) {
  std::mt19937_64 rng(2024);
  for (DType dtype : kDTypes) {
    for (RopeDirection dir : kDirections) {
      for (int64_t half : kHalves) {
        for (int64_t extra : {int64_t{0}, int64_t{3}}) {
          Case c;
          c.dtype = dtype, c.direction = dir, c.half = half, c.head_dim = 2 * half + extra;
          c.n_tokens = 3, c.n_heads = 8, c.offset = 0;
          const Table tb = MakeTable(5, half, false, rng);
          c.layout = RopeLayout::kInterleaved;
          View il = MakeView(c, tb, rng);
          c.layout = RopeLayout::kHalfSplit;
          View hs = MakeView(c, tb, rng);
          hs.rows = il.rows;
          const int64_t es = DTypeSize(dtype);
          for (int64_t t = 0; t < c.n_tokens; ++t) {  // hs = il with pair i moved from (2i, 2i+1) to (i, i+half)
            for (int64_t h = 0; h < c.n_heads; ++h) {
              for (int64_t i = 0; i < half; ++i) {
                std::memcpy(hs.orig.data() + hs.Index(t, h, i) * es, il.orig.data() + il.Index(t, h, 2 * i) * es,
                            es);
                std::memcpy(hs.orig.data() + hs.Index(t, h, i + half) * es,
                            il.orig.data() + il.Index(t, h, 2 * i + 1) * es, es);
              }
            }
          }
          il.simd = il.orig;
          hs.simd = hs.orig;
          RopeKernelSimd(il.Args(il.simd, tb));
          RopeKernelSimd(hs.Args(hs.simd, tb));
          for (int64_t t = 0; t < c.n_tokens; ++t) {
            for (int64_t h = 0; h < c.n_heads; ++h) {
              for (int64_t i = 0; i < half; ++i) {
                ASSERT_EQ(std::memcmp(hs.simd.data() + hs.Index(t, h, i) * es,
                                      il.simd.data() + il.Index(t, h, 2 * i) * es, es),
                          0)
                    << c.Describe() << " token " << t << " head " << h << " pair " << i;
                ASSERT_EQ(std::memcmp(hs.simd.data() + hs.Index(t, h, i + half) * es,
                                      il.simd.data() + il.Index(t, h, 2 * i + 1) * es, es),
                          0)
                    << c.Describe() << " token " << t << " head " << h << " pair " << i;
              }
            }
          }
        }
      }
    }
  }
}

// Heads in reverse memory order (negative head_stride), as a reversed view would give.
TEST_P(RopeKernelTest, NegativeHeadStride) {
  std::mt19937_64 rng(99);
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      Case c;
      c.layout = layout, c.dtype = dtype, c.half = 4, c.head_dim = 8, c.n_heads = 6, c.n_tokens = 2;
      c.head_stride = -8, c.token_stride = 48;
      EXPECT_EQ(RunCase(c, rng), "");
    }
  }
}

// Q and K (GQA: fewer K heads, another stride, another offset) in one RopeKernelQK pass; also K with another
// dtype (two passes) and empty K.
TEST_P(RopeKernelTest, QkInOnePassMatchesTwoScalarCalls) {
  std::mt19937_64 rng(4242);
  for (RopeLayout layout : kLayouts) {
    for (DType q_dtype : kDTypes) {
      for (DType k_dtype : kDTypes) {
        for (int64_t half : {int64_t{4}, int64_t{17}, int64_t{64}}) {
          for (int64_t k_heads : {int64_t{0}, int64_t{2}, int64_t{4}}) {
            Case qc;
            qc.layout = layout, qc.dtype = q_dtype;
            qc.direction = RopeDirection::kBackward, qc.half = half, qc.head_dim = 2 * half;
            qc.n_tokens = 5, qc.n_heads = 8, qc.offset = 1;
            Case kc = qc;
            kc.dtype = k_dtype, kc.n_heads = k_heads, kc.head_dim = 2 * half + 2, kc.offset = 3;
            const Table tb = MakeTable(6, half, false, rng);
            View q = MakeView(qc, tb, rng);
            View k = MakeView(kc, tb, rng);
            k.rows = q.rows;  // one position per token for both
            RopeKernelScalar(q.Args(q.ref, tb));
            if (k_heads > 0) RopeKernelScalar(k.Args(k.ref, tb));
            RopeKernelArgs ka = k.Args(k.simd, tb);
            ka.rows = q.rows.data();
            RopeKernelQK(q.Args(q.simd, tb), ka);
            EXPECT_EQ(Compare(q, tb), "") << "q " << qc.Describe();
            EXPECT_EQ(Compare(k, tb), "") << "k " << kc.Describe();
          }
        }
      }
    }
  }
}

// A call above kRopeParallelMinBytes splits tokens over threads; the same call inside a parallel region
// (where the kernel must not nest) runs on the calling thread. Both match the scalar reference.
TEST_P(RopeKernelTest, ThreadedCallsMatchScalar) {
  std::mt19937_64 rng(31337);
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : {DType::kF32, DType::kBF16}) {
      Case c;
      c.layout = layout, c.dtype = dtype, c.half = 64, c.head_dim = 128, c.n_heads = 8, c.offset = 1;
      c.n_tokens = 2 * kRopeParallelMinBytes / (2 * c.n_heads * 2 * c.half * DTypeSize(dtype)) + 3;
      EXPECT_EQ(RunCase(c, rng), "");
      std::string err_in_region;
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        err_in_region = RunCase(c, rng);
      }
      EXPECT_EQ(err_in_region, "");
    }
  }
}

// The scalar path is selectable and then bit-identical to RopeKernelScalar; kAuto takes the SIMD path.
TEST_P(RopeKernelTest, ScalarPathSelectable) {
  const RopeKernelPath saved = GetRopeKernelPath();
  std::mt19937_64 rng(5);
  Case c;
  c.half = 17, c.head_dim = 40, c.n_heads = 3, c.n_tokens = 4;
  const Table tb = MakeTable(4, c.half, false, rng);
  View v = MakeView(c, tb, rng);
  SetRopeKernelPath(RopeKernelPath::kScalar);
  EXPECT_EQ(GetRopeKernelPath(), RopeKernelPath::kScalar);
  RopeKernelScalar(v.Args(v.ref, tb));
  RopeKernel(v.Args(v.simd, tb));
  EXPECT_EQ(v.simd, v.ref);
  SetRopeKernelPath(RopeKernelPath::kAuto);
  EXPECT_EQ(GetRopeKernelPath(), RopeKernelPath::kAuto);
  v.simd = v.orig;
  RopeKernel(v.Args(v.simd, tb));
  EXPECT_EQ(Compare(v, tb), "");
  SetRopeKernelPath(saved);
}


// ---- on-the-fly coefficients -----------------------------------------------------------------------------

// Frequencies over the range real configs use (1 down to 1e-7 rad/token).
std::vector<float> MakeInvFreq(int64_t half, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> log_f(-23.0, 0.0);
  std::vector<float> inv(static_cast<size_t>(half));
  for (float& f : inv) f = static_cast<float>(std::exp2(log_f(rng)));
  inv[0] = 1.0f;
  return inv;
}

// The coefficients the on-the-fly kernels use, as a table whose row t is token t's (for Compare's bound).
Table OnTheFlyTable(const std::vector<int64_t>& positions, const std::vector<float>& inv, double af,
                    RopePrecision precision) {
  Table tb;
  const int64_t half = static_cast<int64_t>(inv.size());
  tb.n_rows = static_cast<int64_t>(positions.size());
  tb.cos.resize(static_cast<size_t>(tb.n_rows * half));
  tb.sin.resize(tb.cos.size());
  for (int64_t t = 0; t < tb.n_rows; ++t) {
    SinCosRowScalar(inv.data(), half, positions[t], af, precision, tb.cos.data() + t * half,
                    tb.sin.data() + t * half);
  }
  return tb;
}

// On the fly (rows = position ids, coefficients from SinCosRow once per token) the SIMD kernel stays within the
// table mode's bound of the scalar reference on the fly (whose coefficients are SinCosRowScalar's, the same
// bits as SinCosRow's): every layout / dtype / direction / half / shape of MatchesScalarReference, both
// precisions, positions of both signs up to 2^28.
TEST_P(RopeKernelTest, OnTheFlyMatchesScalarReference) {
  std::mt19937_64 rng(8080 + static_cast<uint64_t>(GetParam()));
  std::uniform_int_distribution<int64_t> pos_d(-(int64_t{1} << 28), int64_t{1} << 28);
  int failures = 0;
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      for (RopeDirection dir : kDirections) {
        for (int64_t half : kHalves) {
          for (int shape = 0; shape < 3; ++shape) {
            Case c;
            c.layout = layout, c.dtype = dtype, c.direction = dir, c.half = half;
            if (shape == 0) c.head_dim = 2 * half, c.n_tokens = 3, c.n_heads = 9, c.offset = 0;
            if (shape == 1) c.head_dim = 2 * half + 5, c.n_tokens = 4, c.n_heads = 3, c.offset = 1;
            if (shape == 2) {
              c.head_dim = 2 * half + 1, c.n_tokens = 3, c.n_heads = 4, c.head_stride = 2 * half + 4;
              c.token_stride = 4 * (2 * half + 4) + 3, c.offset = 5;
            }
            const std::vector<float> inv = MakeInvFreq(half, rng);
            const RopePrecision prec = shape == 1 ? RopePrecision::kHf : RopePrecision::kExact;
            const double af = dir == RopeDirection::kInverse ? 1.17 : 1.0;
            Table dummy = MakeTable(1, half, false, rng);  // only for MakeView's row draw
            View v = MakeView(c, dummy, rng);
            for (int64_t& p : v.rows) p = pos_d(rng);
            RopeKernelArgs ref = v.Args(v.ref, dummy), simd = v.Args(v.simd, dummy);
            for (RopeKernelArgs* a : {&ref, &simd}) {
              a->cos = a->sin = nullptr;
              a->inv_freq = inv.data(), a->attention_factor = af, a->precision = prec;
            }
            RopeKernelScalar(ref);
            RopeKernelSimd(simd);
            const Table tb = OnTheFlyTable(v.rows, inv, af, prec);
            View by_token = v;  // Compare reads row t of tb for token t
            for (int64_t t = 0; t < c.n_tokens; ++t) by_token.rows[t] = t;
            const bool bitwise = RoundsBothProducts(GetParam()) && dir != RopeDirection::kInverse;
            const std::string err = Compare(by_token, tb, bitwise);
            if (!err.empty() && failures++ < 5) ADD_FAILURE() << c.Describe() << ": " << err;
          }
        }
      }
    }
  }
}

// Q and K on the fly in one pass (GQA, another K stride and dtype) equal two scalar on-the-fly calls within the
// bound; Q alone through RopeKernel too.
TEST_P(RopeKernelTest, OnTheFlyQkInOnePass) {
  std::mt19937_64 rng(6060);
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      Case qc;
      qc.layout = layout, qc.dtype = dtype, qc.half = 64, qc.head_dim = 128, qc.n_tokens = 5, qc.n_heads = 8;
      Case kc = qc;
      kc.n_heads = 2, kc.head_dim = 130, kc.offset = 3;
      const std::vector<float> inv = MakeInvFreq(64, rng);
      Table dummy = MakeTable(1, 64, false, rng);
      View q = MakeView(qc, dummy, rng), k = MakeView(kc, dummy, rng);
      const std::vector<int64_t> positions{0, 1, 4095, 131071, -77};
      q.rows = k.rows = positions;
      auto fly = [&](RopeKernelArgs a) {
        a.cos = a.sin = nullptr;
        a.inv_freq = inv.data(), a.attention_factor = 1.2, a.precision = RopePrecision::kExact;
        return a;
      };
      RopeKernelScalar(fly(q.Args(q.ref, dummy)));
      RopeKernelScalar(fly(k.Args(k.ref, dummy)));
      const RopeKernelArgs qa = fly(q.Args(q.simd, dummy));
      RopeKernelArgs ka = fly(k.Args(k.simd, dummy));
      ka.rows = qa.rows;  // RopeKernelQK's precondition: Q and K share one position list (checked in debug builds)
      RopeKernelQK(qa, ka);
      const Table tb = OnTheFlyTable(positions, inv, 1.2, RopePrecision::kExact);
      for (View* v : {&q, &k}) {
        View by_token = *v;
        for (int64_t t = 0; t < 5; ++t) by_token.rows[t] = t;
        EXPECT_EQ(Compare(by_token, tb), "") << v->c.Describe();
      }
    }
  }
}

// The whole rotation on the fly against the table path with ComputeCosSin's rows (kExact): the coefficients
// differ by at most 1 ulp (sincos.h), |dc| <= 2u |c|, |ds| <= 2u |s|, which moves an output's exact value by at
// most 2u (|p1| + |p2|); each side's float32 result is within 2u (|p1| + |p2|) of its exact value (one rounded
// product plus the final rounding, fused or not), so |fly - table| <= 6u (|p1| + |p2|), plus one storage unit
// for bfloat16/float16. And nearly all outputs are identical (the coefficients nearly always are).
TEST_P(RopeKernelTest, OnTheFlyMatchesTablePath) {
  std::mt19937_64 rng(4040);
  RopeFrequencies freqs;
  freqs.inv_freq = MakeInvFreq(64, rng);
  freqs.attention_factor = 1.0;
  std::vector<int64_t> positions;
  for (int64_t p = 0; p < 64; ++p) positions.push_back(p);
  std::uniform_int_distribution<int64_t> pos_d(0, int64_t{1} << 28);
  for (int i = 0; i < 64; ++i) positions.push_back(pos_d(rng));
  const CosSinTable table = ComputeCosSin(freqs, positions, RopePrecision::kExact);
  for (RopeLayout layout : kLayouts) {
    for (DType dtype : kDTypes) {
      Case c;
      c.layout = layout, c.dtype = dtype, c.half = 64, c.head_dim = 128;
      c.n_tokens = static_cast<int64_t>(positions.size()), c.n_heads = 4, c.offset = 0;
      Table tb;
      tb.cos = table.cos, tb.sin = table.sin, tb.n_rows = table.n_rows;
      View v = MakeView(c, tb, rng);
      for (int64_t t = 0; t < c.n_tokens; ++t) v.rows[t] = t;
      RopeKernelSimd(v.Args(v.ref, tb));  // "ref" holds the table path here
      RopeKernelArgs fly = v.Args(v.simd, tb);
      fly.cos = fly.sin = nullptr;
      fly.rows = positions.data();
      fly.inv_freq = freqs.inv_freq.data();
      RopeKernelSimd(fly);
      int64_t same = 0, total = 0;
      const int64_t es = DTypeSize(dtype);
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        for (int64_t h = 0; h < c.n_heads; ++h) {
          for (int64_t i = 0; i < c.half; ++i) {
            const bool il = layout == RopeLayout::kInterleaved;
            const int64_t ia = v.Index(t, h, il ? 2 * i : i), ib = v.Index(t, h, il ? 2 * i + 1 : i + c.half);
            const double a = Load(dtype, v.orig, ia), b = Load(dtype, v.orig, ib);
            const double cc = tb.cos[t * c.half + i], ss = tb.sin[t * c.half + i];
            const double m_a = std::fabs(a * cc) + std::fabs(b * ss), m_b = std::fabs(a * ss) + std::fabs(b * cc);
            for (const auto& [e, m] : {std::pair{ia, m_a}, std::pair{ib, m_b}}) {
              const double g = Load(dtype, v.simd, e), r = Load(dtype, v.ref, e);
              const double bound = 6 * kU * m * (1 + 1e-6) + 0x1p-148 +
                                   StorageUlp(dtype, std::max(std::fabs(g), std::fabs(r)));
              ASSERT_LE(std::fabs(g - r), bound) << c.Describe() << " token " << t << " pair " << i;
              same += std::memcmp(v.simd.data() + e * es, v.ref.data() + e * es, es) == 0;
              ++total;
            }
          }
        }
      }
      EXPECT_GT(same, total * 99 / 100) << c.Describe();
      for (int64_t e = 0; e < v.size; ++e) {  // pass-through channels and guards untouched
        bool rotated = false;
        for (int64_t t = 0; t < c.n_tokens && !rotated; ++t) {
          for (int64_t h = 0; h < c.n_heads && !rotated; ++h) {
            rotated = e >= v.Index(t, h, 0) && e < v.Index(t, h, 2 * c.half);
          }
        }
        if (!rotated) {
          ASSERT_EQ(std::memcmp(v.simd.data() + e * es, v.orig.data() + e * es, es), 0) << e;
        }
      }
    }
  }
}

// ---- bfloat16 NaN and infinity -----------------------------------------------------------------------------

// The bfloat16 word path rounds without a per-lane NaN check; a NaN must still come out as a NaN. A NaN result
// whose payload sits only in the low 16 bits can come from a coefficient only, so tokens with a NaN or
// infinite coefficient (payloads 0x7f800001, 0x7fc0ffff, 0xffffffff) take the checked path; NaN and infinite
// inputs (bfloat16, zero low bits) go through the word path. Both layouts, halves with and without tails.
TEST_P(RopeKernelTest, Bf16NanStaysNan) {
  std::mt19937_64 rng(1234);
  const uint32_t nan_bits[3] = {0x7f800001u, 0x7fc0ffffu, 0xffffffffu};
  for (RopeLayout layout : kLayouts) {
    for (int64_t half : {int64_t{16}, int64_t{17}, int64_t{64}}) {
      Case c;
      c.layout = layout, c.dtype = DType::kBF16, c.half = half, c.head_dim = 2 * half, c.n_tokens = 4;
      c.n_heads = 3, c.offset = 1;
      Table tb = MakeTable(4, half, false, rng);
      // Row 1: NaN coefficients with low payload bits; row 2: an infinite cosine.
      for (int64_t i = 0; i < half; i += 5) std::memcpy(&tb.cos[1 * half + i], &nan_bits[i % 3], 4);
      tb.cos[2 * half + 3] = std::numeric_limits<float>::infinity();
      View v = MakeView(c, tb, rng);
      v.rows = {0, 1, 2, 3};
      // Token 3: NaN and infinite inputs.
      Store(DType::kBF16, v.orig, v.Index(3, 0, 0), std::numeric_limits<float>::quiet_NaN());
      Store(DType::kBF16, v.orig, v.Index(3, 1, 1), std::numeric_limits<float>::infinity());
      v.ref = v.orig, v.simd = v.orig;
      RopeKernelScalar(v.Args(v.ref, tb));
      RopeKernelSimd(v.Args(v.simd, tb));
      int64_t nans = 0;
      for (int64_t t = 0; t < c.n_tokens; ++t) {
        for (int64_t h = 0; h < c.n_heads; ++h) {
          for (int64_t i = 0; i < half; ++i) {
            const bool il = layout == RopeLayout::kInterleaved;
            const int64_t ia = v.Index(t, h, il ? 2 * i : i), ib = v.Index(t, h, il ? 2 * i + 1 : i + half);
            const double a = Load(DType::kBF16, v.orig, ia), b = Load(DType::kBF16, v.orig, ib);
            const double cc = tb.cos[v.rows[t] * half + i], ss = tb.sin[v.rows[t] * half + i];
            const double m = std::fabs(a * cc) + std::fabs(b * ss) + std::fabs(a * ss) + std::fabs(b * cc);
            for (int64_t e : {ia, ib}) {
              const float g = Load(DType::kBF16, v.simd, e), r = Load(DType::kBF16, v.ref, e);
              ASSERT_EQ(std::isnan(g), std::isnan(r)) << c.Describe() << " token " << t << " head " << h;
              nans += std::isnan(g);
              if (std::isnan(r) || std::isinf(r)) {
                if (std::isinf(r)) {
                  ASSERT_EQ(g, r);
                }
                continue;
              }
              // The float32 bound of MatchesScalarReference (m covers both outputs' products) plus one unit.
              ASSERT_LE(std::fabs(g - r), 3 * kU * m * (1 + 1e-6) + 0x1p-148 +
                                              StorageUlp(DType::kBF16, std::max(std::fabs(g), std::fabs(r))))
                  << c.Describe() << " token " << t << " pair " << i;
            }
          }
        }
      }
      EXPECT_GT(nans, 0);
    }
  }
}

// POSENC_KERNEL=scalar selects the scalar path in a fresh process (the variable is read once, on first use;
// the "threadsafe" death-test style re-executes this binary, so the child starts with the path unset).
TEST(RopeKernelPath, EnvironmentVariableSelectsScalar) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(setenv("POSENC_KERNEL", "scalar", 1), 0);
  EXPECT_EXIT(std::exit(GetRopeKernelPath() == RopeKernelPath::kScalar ? 0 : 1), ::testing::ExitedWithCode(0), "");
  ASSERT_EQ(setenv("POSENC_KERNEL", "simd", 1), 0);
  EXPECT_EXIT(std::exit(GetRopeKernelPath() == RopeKernelPath::kAuto ? 0 : 1), ::testing::ExitedWithCode(0), "");
  unsetenv("POSENC_KERNEL");
}

}  // namespace
}  // namespace posenc::kernels
