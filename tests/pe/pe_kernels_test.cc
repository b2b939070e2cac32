// The Highway PE kernels (PeRowsSimd, PeSgdSimd) against the scalar reference (PeRowsScalar, PeSgdScalar), once
// per Highway target this CPU supports (AVX3 where the CPU has AVX-512, AVX2, SSE4, SSSE3, SCALAR), and the
// public pe/ functions on the SIMD path against the same functions on the scalar path.
//
// Why the comparison is exact (no tolerance): every output element is produced by float32 additions (the
// gathers are bit copies; the SGD step is one product and one subtraction). Each is a single IEEE-754
// operation rounded to nearest even, and a vector lane performs exactly the operation a scalar instruction
// does (same MXCSR rounding mode, no flush-to-zero in either). The SIMD kernels apply, per element, the same
// operations to the same operands in the same order as the reference: no reassociation (rows are added one
// token at a time, repeated positions in token order even when threads split the table rows), no fused
// multiply-add (Mul then Sub). So the results must agree bit for bit; the inputs are chosen so that these
// additions do round (magnitudes spread over 2^-30 .. 2^30, subnormals, signed zeros), which makes any change
// of order or fusion visible.
//
// Shapes: d_model 1, 3, 7, 8, 9, 17, 64, 100, 768 (below, at, between and above every vector width, with
// tails); odd token counts; token and table strides larger than the row; unaligned starts; repeated and
// unordered positions; implicit positions with an offset. Memory outside the rows (row padding, guards) is
// filled with signalling-NaN bits and must come back unchanged.
#include "posenc/kernels/pe_kernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "hwy/tests/hwy_gtest.h"
#include "pe/pe_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/pe/learned.h"
#include "posenc/pe/sinusoidal.h"

namespace posenc {
namespace {

using kernels::PeKernelPath;
using kernels::PeRowsArgs;
using kernels::PeRowsOp;

constexpr uint32_t kGuardBits = 0x7fa00001u;  // a signalling NaN: any write or arithmetic changes it

float GuardValue() {
  float f;
  std::memcpy(&f, &kGuardBits, 4);
  return f;
}

// A float32 whose additions with others of the set usually round: normal * 2^e, e in [-30, 30]; 1 in 16 is
// a subnormal, 1 in 32 a signed zero.
float SpreadValue(std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-30, 30);
  std::uniform_int_distribution<int> pick(0, 31);
  const int k = pick(rng);
  if (k == 0) return -0.0f;
  if (k == 1) return 0.0f;
  if (k < 4) return normal(rng) * 0x1p-130f;  // subnormal
  return std::ldexp(normal(rng), expo(rng));
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// First index where the bits differ, as text ("" if none).
std::string FirstDifference(const char* what, const std::vector<float>& simd, const std::vector<float>& ref) {
  if (simd.size() != ref.size()) return std::string(what) + ": sizes differ";
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::memcmp(&simd[i], &ref[i], 4) != 0) {
      return std::string(what) + "[" + std::to_string(i) + "]: simd " + std::to_string(simd[i]) + " vs scalar " +
             std::to_string(ref[i]);
    }
  }
  return "";
}

struct RowsCase {
  PeRowsOp op = PeRowsOp::kGatherAdd;
  int64_t n_tokens = 5;
  int64_t d_model = 7;
  int64_t token_pad = 0;  // token_stride = d_model + token_pad
  int64_t table_pad = 0;  // table_stride = d_model + table_pad
  int64_t n_rows = 4;
  int64_t offset = 1;         // elements before the first row of each buffer (1: unaligned)
  bool explicit_rows = true;  // rows[] (random: repeated, unordered) or row_offset + t
  bool descending = false;    // explicit rows n_rows-1, n_rows-2, ... (wrapping)

  std::string Describe() const {
    static const char* kOps[] = {"gather", "gather_add", "scatter_add"};
    return std::string(kOps[static_cast<int>(op)]) + " tokens=" + std::to_string(n_tokens) +
           " d_model=" + std::to_string(d_model) + " token_stride=" + std::to_string(d_model + token_pad) +
           " table_stride=" + std::to_string(d_model + table_pad) + " n_rows=" + std::to_string(n_rows) +
           " offset=" + std::to_string(offset) + (explicit_rows ? " rows[]" : " row_offset");
  }
};

// Buffers of one case: token side and table side, each with guards; rows; and the kernel arguments.
struct RowsBuffers {
  RowsCase c;
  std::vector<float> tokens, table;
  std::vector<int64_t> rows;
  int64_t row_offset = 0;

  PeRowsArgs Args(std::vector<float>& tok, std::vector<float>& tab) const {
    return {c.op,
            c.n_tokens,
            c.d_model,
            tok.data() + c.offset,
            c.d_model + c.token_pad,
            tab.data() + c.offset,
            c.d_model + c.table_pad,
            c.explicit_rows ? rows.data() : nullptr,
            row_offset};
  }
};

RowsBuffers MakeRows(const RowsCase& c, std::mt19937_64& rng) {
  RowsBuffers b;
  b.c = c;
  const int64_t ts = c.d_model + c.token_pad, tbs = c.d_model + c.table_pad;
  constexpr int64_t kGuard = 9;
  b.tokens.assign(static_cast<size_t>(c.offset + std::max<int64_t>(c.n_tokens, 1) * ts + kGuard), GuardValue());
  b.table.assign(static_cast<size_t>(c.offset + c.n_rows * tbs + kGuard), GuardValue());
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    for (int64_t j = 0; j < c.d_model; ++j) b.tokens[static_cast<size_t>(c.offset + t * ts + j)] = SpreadValue(rng);
  }
  for (int64_t r = 0; r < c.n_rows; ++r) {
    for (int64_t j = 0; j < c.d_model; ++j) b.table[static_cast<size_t>(c.offset + r * tbs + j)] = SpreadValue(rng);
  }
  if (c.explicit_rows) {
    std::uniform_int_distribution<int64_t> row(0, c.n_rows - 1);
    for (int64_t t = 0; t < c.n_tokens; ++t) b.rows.push_back(c.descending ? (c.n_rows - 1 - t % c.n_rows) : row(rng));
  } else {
    std::uniform_int_distribution<int64_t> off(0, std::max<int64_t>(c.n_rows - c.n_tokens, 0));
    b.row_offset = off(rng);
  }
  return b;
}

// Runs the scalar reference and the SIMD kernel on copies of the same inputs; "" or the first difference.
std::string RunRowsCase(const RowsCase& c, std::mt19937_64& rng) {
  const RowsBuffers b = MakeRows(c, rng);
  std::vector<float> ref_tok = b.tokens, ref_tab = b.table, simd_tok = b.tokens, simd_tab = b.table;
  kernels::PeRowsScalar(b.Args(ref_tok, ref_tab));
  kernels::PeRowsSimd(b.Args(simd_tok, simd_tab));
  std::string err = FirstDifference("tokens", simd_tok, ref_tok);
  if (err.empty()) err = FirstDifference("table", simd_tab, ref_tab);
  // The side the op does not write must be untouched by both.
  if (err.empty() && c.op == PeRowsOp::kScatterAdd && !SameBits(ref_tok, b.tokens)) err = "tokens written";
  if (err.empty() && c.op != PeRowsOp::kScatterAdd && !SameBits(ref_tab, b.table)) err = "table written";
  return err.empty() ? err : c.Describe() + ": " + err;
}

class PeKernelTest : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(PeKernelTest);

const PeRowsOp kOps[] = {PeRowsOp::kGather, PeRowsOp::kGatherAdd, PeRowsOp::kScatterAdd};
const int64_t kDModels[] = {1, 3, 7, 8, 9, 17, 64, 100, 768};

TEST_P(PeKernelTest, DispatchesToTheTargetUnderTest) {
  EXPECT_STREQ(kernels::PeKernelTargetName(), hwy::TargetName(GetParam()));
}

// Every op, every d_model, odd token counts, contiguous and padded strides, aligned and unaligned starts,
// explicit (random with repeats, or descending) and implicit positions: bit-identical to the reference.
TEST_P(PeKernelTest, RowsMatchScalarBitForBit) {
  std::mt19937_64 rng(2024 + static_cast<uint64_t>(GetParam()));
  int failures = 0;
  for (PeRowsOp op : kOps) {
    for (int64_t d : kDModels) {
      for (int shape = 0; shape < 5; ++shape) {
        RowsCase c;
        c.op = op;
        c.d_model = d;
        switch (shape) {
          case 0:  // contiguous, aligned, random repeated positions in a small table
            c.n_tokens = 1, c.n_rows = 3, c.offset = 0;
            break;
          case 1:  // contiguous, unaligned, many repeats (13 tokens over 4 rows)
            c.n_tokens = 13, c.n_rows = 4, c.offset = 3;
            break;
          case 2:  // strides larger than the row, odd padding
            c.n_tokens = 7, c.n_rows = 5, c.token_pad = 3, c.table_pad = 5, c.offset = 1;
            break;
          case 3:  // descending (unordered) positions wrapping around, padded table
            c.n_tokens = 11, c.n_rows = 4, c.table_pad = 16, c.offset = 2, c.descending = true;
            break;
          case 4:  // implicit positions row_offset + t (KV-cache offset), padded tokens
            c.n_tokens = 9, c.n_rows = 20, c.token_pad = 1, c.offset = 1, c.explicit_rows = false;
            break;
        }
        const std::string err = RunRowsCase(c, rng);
        if (!err.empty() && failures++ < 5) ADD_FAILURE() << err;
      }
    }
  }
}

// Scatter-add of many tokens into few rows: the sums of repeated positions (hundreds of rounding additions
// per element) must come out in the reference's token order, bit for bit.
TEST_P(PeKernelTest, ScatterAddSumsRepeatsInTokenOrder) {
  std::mt19937_64 rng(99 + static_cast<uint64_t>(GetParam()));
  for (int64_t d : {int64_t{9}, int64_t{64}, int64_t{100}}) {
    RowsCase c;
    c.op = PeRowsOp::kScatterAdd;
    c.d_model = d, c.n_tokens = 301, c.n_rows = 3, c.offset = 1;
    EXPECT_EQ(RunRowsCase(c, rng), "");
  }
}

// Calls above kPeParallelMinBytes (threads: tokens split for the gathers, table rows for the scatter-add, index
// blocks for SGD), with up to 4 OpenMP threads: still bit-identical. Scatter-adds run with explicit positions
// crowded into 37 rows (repeats in every piece of rows) and with implicit positions (contiguous token ranges per
// piece). Also inside an active parallel region (the kernel must then stay on the calling thread).
TEST_P(PeKernelTest, ThreadedCallsMatchScalar) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(4);
  std::mt19937_64 rng(7 + static_cast<uint64_t>(GetParam()));
  for (PeRowsOp op : kOps) {
    for (int64_t d : {int64_t{100}, int64_t{200}, int64_t{768}}) {
      RowsCase c;
      c.op = op;
      c.d_model = d;
      c.n_tokens = 1501;  // >= 1.2 MB moved for d = 100 gathers; 13.8 MB for d = 768 adds
      c.n_rows = op == PeRowsOp::kScatterAdd ? 37 : 1024;
      c.token_pad = 3;
      c.offset = 1;
      ASSERT_GE(3 * c.n_tokens * c.d_model * 4, kernels::kPeParallelMinBytes) << c.Describe();
      EXPECT_EQ(RunRowsCase(c, rng), "");
      RowsCase implicit = c;
      implicit.explicit_rows = false;
      implicit.n_rows = c.n_tokens + 100;
      EXPECT_EQ(RunRowsCase(implicit, rng), "");
      std::string err_in_region;
#pragma omp parallel num_threads(2)
      {
#pragma omp single
        err_in_region = RunRowsCase(c, rng);
      }
      EXPECT_EQ(err_in_region, "");
    }
  }
  omp_set_num_threads(saved_threads);
}

// The SGD step: every length around the vector widths (and a threaded one), unaligned, several rates.
TEST_P(PeKernelTest, SgdMatchesScalarBitForBit) {
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(4);
  std::mt19937_64 rng(31 + static_cast<uint64_t>(GetParam()));
  for (int64_t n : {1, 3, 7, 8, 9, 16, 17, 33, 100, 768, 1 << 20}) {
    for (float lr : {0.1f, 3.0e-4f, -1.5f}) {
      std::vector<float> w(static_cast<size_t>(n + 2)), g(static_cast<size_t>(n + 2));
      for (float& v : w) v = SpreadValue(rng);
      for (float& v : g) v = SpreadValue(rng);
      w.back() = GuardValue();
      std::vector<float> ref = w, simd = w;
      kernels::PeSgdScalar(ref.data() + 1, g.data() + 1, n, lr);
      kernels::PeSgdSimd(simd.data() + 1, g.data() + 1, n, lr);
      EXPECT_EQ(FirstDifference("w", simd, ref), "") << "n=" << n << " lr=" << lr;
    }
  }
  omp_set_num_threads(saved_threads);
}

// The scalar path is selectable (then PeRowsKernel / PeSgdKernel equal the reference, of course) and kAuto runs
// the SIMD path, which gives the same bits.
TEST_P(PeKernelTest, ScalarPathSelectable) {
  const PeKernelPath saved = kernels::GetPeKernelPath();
  std::mt19937_64 rng(5);
  RowsCase c;
  c.op = PeRowsOp::kScatterAdd, c.d_model = 17, c.n_tokens = 9, c.n_rows = 4;
  const RowsBuffers b = MakeRows(c, rng);
  std::vector<float> ref_tok = b.tokens, ref_tab = b.table;
  kernels::PeRowsScalar(b.Args(ref_tok, ref_tab));
  for (PeKernelPath path : {PeKernelPath::kScalar, PeKernelPath::kAuto}) {
    kernels::SetPeKernelPath(path);
    EXPECT_EQ(kernels::GetPeKernelPath(), path);
    std::vector<float> tok = b.tokens, tab = b.table;
    kernels::PeRowsKernel(b.Args(tok, tab));
    EXPECT_TRUE(SameBits(tab, ref_tab));
    EXPECT_TRUE(SameBits(tok, ref_tok));
  }
  kernels::SetPeKernelPath(saved);
}

// ===== the public functions: SIMD path against the scalar path =============================================

// Runs fn once with the scalar path and once with kAuto (4 OpenMP threads allowed), restoring the path.
template <typename Fn>
void BothPaths(Fn fn) {
  const PeKernelPath saved = kernels::GetPeKernelPath();
  const int saved_threads = omp_get_max_threads();
  kernels::SetPeKernelPath(PeKernelPath::kScalar);
  fn(0);
  kernels::SetPeKernelPath(PeKernelPath::kAuto);
  omp_set_num_threads(4);
  fn(1);
  omp_set_num_threads(saved_threads);
  kernels::SetPeKernelPath(saved);
}

// LearnedPeForward / ForwardAdd / Backward (explicit and offset positions) and LearnedPeSgdStep: the same bits on
// both paths, small (decode) and large (threaded) calls, odd d_model, repeated and unordered positions.
TEST_P(PeKernelTest, LearnedPeFunctionsSameBitsOnBothPaths) {
  for (int64_t d : {int64_t{1}, int64_t{7}, int64_t{17}, int64_t{100}, int64_t{768}}) {
    for (int64_t n_tokens : {int64_t{1}, int64_t{13}, int64_t{1501}}) {
      SCOPED_TRACE("d_model=" + std::to_string(d) + " n_tokens=" + std::to_string(n_tokens));
      std::mt19937_64 rng(static_cast<uint64_t>(d * 1000 + n_tokens));
      const int64_t max_seq_len = 2048;
      LearnedPositionalEmbedding pe(max_seq_len, d);
      for (float& v : pe.table()) v = SpreadValue(rng);
      std::vector<int64_t> ids(static_cast<size_t>(n_tokens));
      std::uniform_int_distribution<int64_t> pos(0, 40);  // few distinct rows: many repeats
      for (int64_t& p : ids) p = pos(rng);
      std::vector<float> x0(static_cast<size_t>(n_tokens * d));
      for (float& v : x0) v = SpreadValue(rng);
      const int64_t offset = max_seq_len - n_tokens - 3;

      std::vector<float> out[2], add[2], out_off[2], add_off[2], dtable[2], dtable_off[2], w[2];
      BothPaths([&](int k) {
        out[k].assign(x0.size(), 0.0f);
        LearnedPeForward(pe, ids, out[k]);
        add[k] = x0;
        LearnedPeForwardAdd(pe, ids, add[k]);
        out_off[k].assign(x0.size(), 0.0f);
        LearnedPeForward(pe, offset, n_tokens, out_off[k]);
        add_off[k] = x0;
        LearnedPeForwardAdd(pe, offset, n_tokens, add_off[k]);
        dtable[k].assign(pe.table().begin(), pe.table().end());  // accumulate onto non-zero values
        LearnedPeBackward(pe, ids, x0, dtable[k]);
        dtable_off[k].assign(pe.table().begin(), pe.table().end());
        LearnedPeBackward(pe, offset, n_tokens, x0, dtable_off[k]);
        LearnedPositionalEmbedding trained = pe;
        LearnedPeSgdStep(trained, dtable[k], 0.01f);
        w[k].assign(trained.table().begin(), trained.table().end());
      });
      EXPECT_EQ(FirstDifference("forward", out[1], out[0]), "");
      EXPECT_EQ(FirstDifference("forward_add", add[1], add[0]), "");
      EXPECT_EQ(FirstDifference("forward offset", out_off[1], out_off[0]), "");
      EXPECT_EQ(FirstDifference("forward_add offset", add_off[1], add_off[0]), "");
      EXPECT_EQ(FirstDifference("backward", dtable[1], dtable[0]), "");
      EXPECT_EQ(FirstDifference("backward offset", dtable_off[1], dtable_off[0]), "");
      EXPECT_EQ(FirstDifference("sgd", w[1], w[0]), "");
    }
  }
}

// SinusoidalTable and AddSinusoidal, both layouts and divisors, even d_model from 2 to 768, small and threaded
// (>= 2^15 pairs) calls, negative / repeated / unordered positions: the same bits on both paths.
TEST_P(PeKernelTest, SinusoidalFunctionsSameBitsOnBothPaths) {
  for (SinusoidalLayout layout : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated}) {
    for (SinusoidalDivisor divisor : {SinusoidalDivisor::kHalf, SinusoidalDivisor::kHalfMinusOne}) {
      for (int64_t d : {int64_t{2}, int64_t{8}, int64_t{18}, int64_t{100}, int64_t{768}}) {
        for (int64_t n_tokens : {int64_t{1}, int64_t{37}, int64_t{301}}) {
          SCOPED_TRACE("d_model=" + std::to_string(d) + " n_tokens=" + std::to_string(n_tokens));
          const SinusoidalParams params{d, 10000.0, layout, divisor};
          std::mt19937_64 rng(static_cast<uint64_t>(d * 7 + n_tokens));
          std::vector<int64_t> ids(static_cast<size_t>(n_tokens));
          std::uniform_int_distribution<int64_t> pos(-50, 5000);
          for (int64_t& p : ids) p = pos(rng);
          std::vector<float> x0(static_cast<size_t>(n_tokens * d));
          for (float& v : x0) v = SpreadValue(rng);
          std::vector<float> table[2], x[2];
          BothPaths([&](int k) {
            table[k] = SinusoidalTable(params, ids);
            x[k] = x0;
            AddSinusoidal(params, ids, x[k]);
          });
          EXPECT_EQ(FirstDifference("table", table[1], table[0]), "");
          EXPECT_EQ(FirstDifference("x", x[1], x[0]), "");
        }
      }
    }
  }
}

// ===== properties of the public functions that the kernels must keep ========================================

// The table is one float32 rounding of the double-precision sin/cos (the values the accurate, unvectorised
// table build has always produced): equal bit for bit to float(std::sin(double(p) * omega_i)), also for the
// threaded build.
TEST(PeKernels, SinusoidalTableIsOneRoundingOfDoubleSinCos) {
  const SinusoidalParams params{64, 10000.0, SinusoidalLayout::kInterleaved, SinusoidalDivisor::kHalf};
  const std::vector<double> omega = SinusoidalFrequencies(params);
  std::vector<int64_t> ids(2000);
  for (size_t t = 0; t < ids.size(); ++t) ids[t] = static_cast<int64_t>(t * 37 % 5003) - 100;
  const std::vector<float> table = SinusoidalTable(params, ids);  // 64000 pairs: threaded
  for (size_t t = 0; t < ids.size(); ++t) {
    for (size_t i = 0; i < 32; ++i) {
      const double angle = static_cast<double>(ids[t]) * omega[i];
      ASSERT_EQ(table[t * 64 + 2 * i], static_cast<float>(std::sin(angle))) << t << " " << i;
      ASSERT_EQ(table[t * 64 + 2 * i + 1], static_cast<float>(std::cos(angle))) << t << " " << i;
    }
  }
}

// A precomputed sinusoidal table held in a (frozen) LearnedPositionalEmbedding and added with
// LearnedPeForwardAdd gives AddSinusoidal's result bit for bit: both add the same float32 row values once.
TEST(PeKernels, PrecomputedSinusoidalTableAddEqualsAddSinusoidal) {
  const int64_t d = 100, max_seq_len = 512;
  const SinusoidalParams params{d, 10000.0, SinusoidalLayout::kConcatenated, SinusoidalDivisor::kHalf};
  std::vector<int64_t> all(static_cast<size_t>(max_seq_len));
  for (int64_t p = 0; p < max_seq_len; ++p) all[static_cast<size_t>(p)] = p;
  LearnedPositionalEmbedding frozen(max_seq_len, d);
  SinusoidalTable(params, all, frozen.table());
  std::mt19937_64 rng(3);
  std::vector<int64_t> ids(700);
  std::uniform_int_distribution<int64_t> pos(0, max_seq_len - 1);
  for (int64_t& p : ids) p = pos(rng);
  std::vector<float> a(ids.size() * static_cast<size_t>(d));
  for (float& v : a) v = SpreadValue(rng);
  std::vector<float> b = a;
  AddSinusoidal(params, ids, a);
  LearnedPeForwardAdd(frozen, ids, b);
  EXPECT_EQ(FirstDifference("x", b, a), "");
}

// Scatter-add with exactly representable values: dtable[r] = initial + (number of tokens at r) * value, as the
// math says (every partial sum is a small multiple of 1/8, exact in float32).
TEST(PeKernels, BackwardCountsRepeatedPositionsExactly) {
  const int64_t d = 19, max_seq_len = 6;
  LearnedPositionalEmbedding pe(max_seq_len, d);
  const std::vector<int64_t> ids = {5, 0, 5, 2, 5, 0, 3, 5};  // row 5 four times, row 0 twice
  std::vector<float> dout(ids.size() * static_cast<size_t>(d));
  for (size_t t = 0; t < ids.size(); ++t) {
    for (int64_t c = 0; c < d; ++c) dout[t * d + static_cast<size_t>(c)] = static_cast<float>(c) / 8.0f;
  }
  std::vector<float> dtable(static_cast<size_t>(max_seq_len * d), 0.5f);
  LearnedPeBackward(pe, ids, dout, dtable);
  const int counts[6] = {2, 0, 1, 1, 0, 4};
  for (int64_t r = 0; r < max_seq_len; ++r) {
    for (int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(dtable[static_cast<size_t>(r * d + c)], 0.5f + static_cast<float>(counts[r]) * c / 8.0f)
          << r << " " << c;
    }
  }
}

// A bad position deep inside a large (threaded-size) call: RangeError naming the field, index and value, and
// nothing written, on the SIMD path.
TEST(PeKernels, OutOfRangePositionInALargeCallIsARangeErrorAndWritesNothing) {
  const int64_t d = 768, max_seq_len = 1024;
  LearnedPositionalEmbedding pe(max_seq_len, d);
  std::vector<int64_t> ids(1000, 3);
  ids[777] = 1024;
  std::vector<float> x(ids.size() * static_cast<size_t>(d), 1.0f);
  pe_test::ExpectThrowsWith<RangeError>([&] { LearnedPeForwardAdd(pe, ids, x); },
                                        {"position_ids[777] = 1024", "max_seq_len = 1024"});
  for (float v : x) ASSERT_EQ(v, 1.0f);
  std::vector<float> dtable(static_cast<size_t>(max_seq_len * d), 0.0f);
  ids[777] = -2;
  pe_test::ExpectThrowsWith<RangeError>([&] { LearnedPeBackward(pe, ids, x, dtable); },
                                        {"position_ids[777] = -2", "max_seq_len = 1024"});
  for (float v : dtable) ASSERT_EQ(v, 0.0f);
}

// POSENC_KERNEL=scalar selects the scalar PE path in a fresh process (read once, on first use; the
// "threadsafe" death-test style re-executes this binary, so the child starts with the path unset).
TEST(PeKernelPathEnv, EnvironmentVariableSelectsScalar) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  ASSERT_EQ(setenv("POSENC_KERNEL", "scalar", 1), 0);
  EXPECT_EXIT(std::exit(kernels::GetPeKernelPath() == PeKernelPath::kScalar ? 0 : 1), ::testing::ExitedWithCode(0), "");
  ASSERT_EQ(setenv("POSENC_KERNEL", "simd", 1), 0);
  EXPECT_EXIT(std::exit(kernels::GetPeKernelPath() == PeKernelPath::kAuto ? 0 : 1), ::testing::ExitedWithCode(0), "");
  unsetenv("POSENC_KERNEL");
}

}  // namespace
}  // namespace posenc
