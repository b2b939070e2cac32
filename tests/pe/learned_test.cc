// Tests for posenc/pe/learned.h: gather with a KV-cache offset (a public bug report), scatter-add backward,
// a finite-difference gradient check, a short SGD training run, the seeded init, save/load and every
// error message.
#include "posenc/pe/learned.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "pe/pe_test_util.h"
#include "posenc/core/errors.h"

namespace posenc {
namespace {

using pe_test::BugCase;
using pe_test::ExpectThrowsWith;

// A table whose every entry is exact and distinct: wpe[r][c] = r + c / 8.
LearnedPositionalEmbedding IndexTable(int64_t max_seq_len, int64_t d_model) {
  LearnedPositionalEmbedding pe(max_seq_len, d_model);
  for (int64_t r = 0; r < max_seq_len; ++r) {
    for (int64_t c = 0; c < d_model; ++c) {
      pe.table()[static_cast<size_t>(r * d_model + c)] = static_cast<float>(r) + static_cast<float>(c) / 8.0f;
    }
  }
  return pe;
}

std::filesystem::path TempFile(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / ("posenc_learned_" + name);
}

// ===== The KV-cache offset (public bug report) =====================================================================

// Table of 16 rows; prefill 5 tokens (rows 0..4); then decode 2 single tokens, which must use rows 5 and 6
// (the cache length), not row 0, and must still add PE although each input is a single token.
TEST(PublicBugReports, LearnedPeKvCacheOffset) {
  const nlohmann::json c = BugCase("learned_pe_kv_cache_offset");
  const int64_t max_positions = c.at("inputs").at("max_positions").get<int64_t>();
  const int64_t prefill_len = c.at("inputs").at("prefill_len").get<int64_t>();
  const int64_t decode_steps = c.at("inputs").at("decode_steps").get<int64_t>();
  const std::vector<int64_t> expected_rows = c.at("expected").at("decode_position_rows").get<std::vector<int64_t>>();
  ASSERT_EQ(static_cast<int64_t>(expected_rows.size()), decode_steps);

  const int64_t d = 4;
  const LearnedPositionalEmbedding pe = IndexTable(max_positions, d);
  const float token_embedding = 0.5f;  // every token's embedding is 0.5 in every channel (exact sums)

  int64_t cache_len = 0;
  // Prefill: rows 0 .. prefill_len-1.
  std::vector<float> x(static_cast<size_t>(prefill_len * d), token_embedding);
  LearnedPeForwardAdd(pe, cache_len, prefill_len, x);
  for (int64_t t = 0; t < prefill_len; ++t) {
    for (int64_t ch = 0; ch < d; ++ch) {
      EXPECT_EQ(x[static_cast<size_t>(t * d + ch)], token_embedding + static_cast<float>(t) + ch / 8.0f);
    }
  }
  cache_len += prefill_len;

  // Decode: one token per step at position cache_len.
  for (int64_t step = 0; step < decode_steps; ++step) {
    const int64_t row = expected_rows[static_cast<size_t>(step)];
    std::vector<float> one(static_cast<size_t>(d), token_embedding);
    LearnedPeForwardAdd(pe, cache_len, 1, one);
    std::vector<float> gathered(static_cast<size_t>(d));
    LearnedPeForward(pe, cache_len, 1, gathered);
    std::vector<float> explicit_add(static_cast<size_t>(d), token_embedding);
    const std::vector<int64_t> position_ids = {cache_len};
    LearnedPeForwardAdd(pe, position_ids, explicit_add);
    for (int64_t ch = 0; ch < d; ++ch) {
      const float want = static_cast<float>(row) + ch / 8.0f;
      const size_t k = static_cast<size_t>(ch);
      EXPECT_EQ(gathered[k], want) << "step " << step << " channel " << ch;
      EXPECT_EQ(one[k], token_embedding + want) << "single-token input must still add PE row " << row;
      EXPECT_EQ(explicit_add[k], one[k]);
      EXPECT_NE(one[k], token_embedding + ch / 8.0f) << "decode used row 0 (the reported bug)";
    }
    cache_len += 1;
  }
  EXPECT_EQ(cache_len, prefill_len + decode_steps);
}

// ===== forward =============================================================================================

TEST(LearnedPe, ForwardGathersRowsIncludingRepeats) {
  const LearnedPositionalEmbedding pe = IndexTable(10, 3);
  const std::vector<int64_t> position_ids = {9, 0, 4, 4, 9};
  std::vector<float> out(15, -1.0f);
  LearnedPeForward(pe, position_ids, out);
  for (size_t t = 0; t < position_ids.size(); ++t) {
    for (size_t ch = 0; ch < 3; ++ch) {
      EXPECT_EQ(out[t * 3 + ch], static_cast<float>(position_ids[t]) + ch / 8.0f);
    }
  }
  EXPECT_EQ(pe.Row(4)[2], 4.25f);
  // Zero tokens: nothing to do, any offset inside the table.
  std::vector<float> none;
  LearnedPeForward(pe, 10, 0, none);
}

// ===== backward ============================================================================================

// Hand-computed scatter-add: max_seq_len 4, d_model 2, positions [1, 3, 1, 1], dout rows [1,2],[3,4],[5,6],
// [7,8], dtable starting at 0.5 everywhere (it accumulates; it is never zeroed by the function):
//   dtable[0] = [0.5, 0.5]; dtable[1] = 0.5 + [1+5+7, 2+6+8] = [13.5, 16.5]; dtable[2] = [0.5, 0.5];
//   dtable[3] = 0.5 + [3, 4] = [3.5, 4.5]. A second identical call adds the same amounts again.
TEST(LearnedPe, BackwardScatterAddsAndAccumulatesRepeatedPositions) {
  const LearnedPositionalEmbedding pe(4, 2);
  const std::vector<int64_t> position_ids = {1, 3, 1, 1};
  const std::vector<float> dout = {1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<float> dtable(8, 0.5f);
  LearnedPeBackward(pe, position_ids, dout, dtable);
  EXPECT_EQ(dtable, (std::vector<float>{0.5f, 0.5f, 13.5f, 16.5f, 0.5f, 0.5f, 3.5f, 4.5f}));
  LearnedPeBackward(pe, position_ids, dout, dtable);
  EXPECT_EQ(dtable, (std::vector<float>{0.5f, 0.5f, 26.5f, 32.5f, 0.5f, 0.5f, 6.5f, 8.5f}));

  // Offset form: tokens 0..2 at offset 1 -> rows 1, 2, 3.
  std::vector<float> dtable2(8, 0.0f);
  LearnedPeBackward(pe, 1, 3, std::span<const float>(dout).first(6), dtable2);
  EXPECT_EQ(dtable2, (std::vector<float>{0, 0, 1, 2, 3, 4, 5, 6}));
}

// Finite-difference check of dL/dwpe for L = sum_{t,c} w[t,c] * y[t,c]^2 / 2, y = x + wpe[pos_t]
// (forward-add), dL/dy = w * y. Positions repeat, so rows receive several contributions.
// Every input is a multiple of 2^-10 in [-2, 2), w a multiple of 2^-4 in [-2, 2), h = 2^-8: every float32
// sum y is exact, every y^2 * w and the loss sums are exact in double, and the loss is quadratic so the
// central difference has no truncation error: the numeric and analytic gradients agree exactly.
TEST(LearnedPe, BackwardMatchesCentralFiniteDifferences) {
  const int64_t max_seq_len = 6, d = 3;
  const std::vector<int64_t> position_ids = {0, 2, 2, 5, 1, 2, 0};
  const size_t n = position_ids.size();
  std::mt19937_64 rng(25);
  auto dyadic = [&](int bits) {  // uniform multiple of 2^-bits in [-2, 2)
    const int64_t range = int64_t{4} << bits;
    return static_cast<float>(
        static_cast<double>(static_cast<int64_t>(rng() % static_cast<uint64_t>(range)) - range / 2) /
        static_cast<double>(int64_t{1} << bits));
  };
  LearnedPositionalEmbedding pe(max_seq_len, d);
  for (float& v : pe.table()) v = dyadic(10);
  std::vector<float> x(n * d), w(n * d);
  for (float& v : x) v = dyadic(10);
  for (float& v : w) v = dyadic(4);

  auto loss = [&](const LearnedPositionalEmbedding& table) {
    std::vector<float> y = x;
    LearnedPeForwardAdd(table, position_ids, y);
    double l = 0;
    for (size_t i = 0; i < y.size(); ++i) l += 0.5 * static_cast<double>(w[i]) * y[i] * y[i];
    return l;
  };

  // Analytic: forward, dL/dy, backward into a zeroed gradient.
  std::vector<float> y = x;
  LearnedPeForwardAdd(pe, position_ids, y);
  std::vector<float> dy(n * d);
  for (size_t i = 0; i < dy.size(); ++i) dy[i] = w[i] * y[i];
  std::vector<float> dtable(static_cast<size_t>(max_seq_len * d), 0.0f);
  LearnedPeBackward(pe, position_ids, dy, dtable);

  const float h = 0x1p-8f;
  int rows_with_gradient = 0;
  for (size_t i = 0; i < dtable.size(); ++i) {
    LearnedPositionalEmbedding plus = pe, minus = pe;
    plus.table()[i] += h;
    minus.table()[i] -= h;
    const double numeric = (loss(plus) - loss(minus)) / (2.0 * h);
    EXPECT_EQ(static_cast<double>(dtable[i]), numeric) << "row " << i / d << " channel " << i % d;
    if (dtable[i] != 0.0f) ++rows_with_gradient;
  }
  // Rows 3 and 4 are never used: their gradient is exactly 0 (checked above); the others are not all 0.
  EXPECT_GT(rows_with_gradient, 0);
  for (size_t ch = 0; ch < static_cast<size_t>(d); ++ch) {
    EXPECT_EQ(dtable[3 * d + ch], 0.0f);
    EXPECT_EQ(dtable[4 * d + ch], 0.0f);
  }
}

// Fit the table to a toy target by SGD through forward + backward.
// Loss L = 1/(2n) sum_t ||wpe[pos_t] - target[pos_t]||^2 over a batch where row r appears c_r times
// (c = 2 for rows 0..2, 1 for rows 3..7; n = 11). One step with rate lr scales row r's error by
// (1 - lr c_r / n), so after S steps L_S = sum_r c_r/(2n) ||e_r||^2 (1 - lr c_r / n)^(2S) exactly (up to
// float32 rounding). With lr = 2, S = 10: factors 0.818 (c=1) and 0.636 (c=2); L_10 / L_0 <= 0.818^20 =
// 0.0181. Asserts: the loss falls at every step, L_10 <= 0.0182 L_0, and L_10 matches the closed form within
// relative 1e-4 (float32 rounding of ~1-sized values over 10 steps is ~1e-6 relative to errors >= 0.1).
TEST(LearnedPe, SgdTrainingReducesLossAsPredicted) {
  const int64_t max_seq_len = 8, d = 4;
  const std::vector<int64_t> position_ids = {0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2};
  const size_t n = position_ids.size();
  const float lr = 2.0f;
  const int steps = 10;
  LearnedPositionalEmbedding pe(max_seq_len, d);
  InitLearnedPeNormal(pe, 1234);
  std::vector<float> target(static_cast<size_t>(max_seq_len * d));
  for (size_t i = 0; i < target.size(); ++i) target[i] = static_cast<float>(std::sin(static_cast<double>(i)));

  auto batch_loss = [&](std::vector<float>* dout) {
    std::vector<float> out(n * d);
    LearnedPeForward(pe, position_ids, out);
    double l = 0;
    for (size_t t = 0; t < n; ++t) {
      for (size_t c = 0; c < static_cast<size_t>(d); ++c) {
        const double diff = static_cast<double>(out[t * d + c]) - target[static_cast<size_t>(position_ids[t]) * d + c];
        l += diff * diff / (2.0 * static_cast<double>(n));
        if (dout) (*dout)[t * d + c] = static_cast<float>(diff / static_cast<double>(n));
      }
    }
    return l;
  };

  // Closed form from the initial errors.
  double predicted = 0;
  for (int64_t r = 0; r < max_seq_len; ++r) {
    const double count = r < 3 ? 2.0 : 1.0;
    double sq = 0;
    for (int64_t c = 0; c < d; ++c) {
      const double e =
          static_cast<double>(pe.table()[static_cast<size_t>(r * d + c)]) - target[static_cast<size_t>(r * d + c)];
      sq += e * e;
    }
    predicted +=
        count / (2.0 * static_cast<double>(n)) * sq * std::pow(1.0 - lr * count / static_cast<double>(n), 2 * steps);
  }

  const double initial = batch_loss(nullptr);
  double previous = initial;
  for (int s = 0; s < steps; ++s) {
    std::vector<float> dout(n * d);
    batch_loss(&dout);
    std::vector<float> dtable(static_cast<size_t>(max_seq_len * d), 0.0f);  // callers zero the gradient
    LearnedPeBackward(pe, position_ids, dout, dtable);
    LearnedPeSgdStep(pe, dtable, lr);
    const double l = batch_loss(nullptr);
    EXPECT_LT(l, previous) << "step " << s;
    previous = l;
  }
  EXPECT_GT(initial, 0.1);  // the target is far from a 0.02-scale init
  EXPECT_LE(previous, 0.0182 * initial);
  EXPECT_NEAR(previous, predicted, 1e-4 * predicted);
}

// ===== init ================================================================================================

// normal(0, 0.02), seeded. For N = 65536 values, the sample mean has standard error 0.02/sqrt(N) = 7.8e-5
// and the sample standard deviation 0.02/sqrt(2N) = 5.5e-5; the test allows 5 standard errors. The
// seed is fixed, so the result is deterministic (no flakiness).
TEST(LearnedPe, InitIsSeededNormalWithStd002) {
  LearnedPositionalEmbedding a(256, 256), b(256, 256), c(256, 256);
  InitLearnedPeNormal(a, 42);
  InitLearnedPeNormal(b, 42);
  InitLearnedPeNormal(c, 43);
  EXPECT_TRUE(std::equal(a.table().begin(), a.table().end(), b.table().begin())) << "same seed, same table";
  EXPECT_FALSE(std::equal(a.table().begin(), a.table().end(), c.table().begin())) << "seed is used";
  double sum = 0, sum_sq = 0;
  for (float v : a.table()) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sum_sq += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(a.table().size());
  const double mean = sum / n;
  const double stddev = std::sqrt(sum_sq / n - mean * mean);
  EXPECT_NEAR(mean, 0.0, 5 * 0.02 / std::sqrt(n));
  EXPECT_NEAR(stddev, 0.02, 5 * 0.02 / std::sqrt(2 * n));
}

// The generator is the one the header documents (so a seed gives the same table with any standard
// library): Box-Muller on consecutive std::mt19937_64 outputs. Recomputed here from the documentation.
TEST(LearnedPe, InitFollowsTheDocumentedGenerator) {
  LearnedPositionalEmbedding pe(1, 5);  // odd count: the last sin value is dropped
  InitLearnedPeNormal(pe, 7, 0.5);
  std::mt19937_64 g(7);
  std::vector<float> expected;
  for (int j = 0; j < 3; ++j) {
    const uint64_t a = g(), b = g();
    const double u1 = static_cast<double>((a >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(b >> 11) * 0x1p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    expected.push_back(static_cast<float>(0.5 * (r * std::cos(2.0 * std::numbers::pi * u2))));
    expected.push_back(static_cast<float>(0.5 * (r * std::sin(2.0 * std::numbers::pi * u2))));
  }
  expected.resize(5);
  EXPECT_TRUE(std::equal(expected.begin(), expected.end(), pe.table().begin()));
  // stddev 0 gives an all-zero table.
  InitLearnedPeNormal(pe, 7, 0.0);
  for (float v : pe.table()) EXPECT_EQ(v, 0.0f);
}

// ===== save / load =========================================================================================

TEST(LearnedPe, SaveLoadRoundTripIsBitExactAndFollowsTheFormat) {
  LearnedPositionalEmbedding pe(16, 8);
  InitLearnedPeNormal(pe, 99);
  pe.table()[3] = -0.0f;                                     // sign of zero survives
  pe.table()[4] = std::numeric_limits<float>::denorm_min();  // subnormals survive
  const auto path = TempFile("roundtrip.bin");
  SaveLearnedPe(pe, path);
  EXPECT_EQ(std::filesystem::file_size(path), 32u + 4u * 16u * 8u);

  const LearnedPositionalEmbedding back = LoadLearnedPe(path);
  EXPECT_EQ(back.max_seq_len(), 16);
  EXPECT_EQ(back.d_model(), 8);
  ASSERT_EQ(back.table().size(), pe.table().size());
  EXPECT_EQ(std::memcmp(back.table().data(), pe.table().data(), pe.table().size() * sizeof(float)), 0);

  // Header bytes as documented: magic, version 1, dtype 0, max_seq_len, d_model (little-endian).
  std::ifstream f(path, std::ios::binary);
  const std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_GE(bytes.size(), 36u);
  EXPECT_EQ(std::string(bytes.begin(), bytes.begin() + 8), "posencPE");
  const std::vector<unsigned char> ints(bytes.begin() + 8, bytes.begin() + 32);
  EXPECT_EQ(ints,
            (std::vector<unsigned char>{1, 0, 0, 0, 0, 0, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0}));
  uint32_t first_bits = 0;
  for (int b = 0; b < 4; ++b) first_bits |= static_cast<uint32_t>(bytes[32 + static_cast<size_t>(b)]) << (8 * b);
  uint32_t want_bits;
  std::memcpy(&want_bits, &pe.table()[0], 4);
  EXPECT_EQ(first_bits, want_bits);
  std::filesystem::remove(path);
}

TEST(LearnedPeErrors, LoadTruncatedFileNamesExpectedAndActualSize) {
  const LearnedPositionalEmbedding pe = IndexTable(16, 8);  // 32 + 512 = 544 bytes
  const auto path = TempFile("truncated.bin");
  SaveLearnedPe(pe, path);
  std::filesystem::resize_file(path, 300);
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); },
                            {"truncated", "expected 544 bytes", "got 300 bytes", "4 * 16 * 8", path.string()});
  std::filesystem::resize_file(path, 10);
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"truncated", "10 bytes", "32-byte header"});
  std::filesystem::remove(path);
}

TEST(LearnedPeErrors, LoadRejectsTrailingBytesBadMagicVersionAndNonFinite) {
  const LearnedPositionalEmbedding pe = IndexTable(2, 2);  // 32 + 16 = 48 bytes
  const auto path = TempFile("corrupt.bin");
  auto patch = [&](size_t offset, std::vector<unsigned char> bytes) {
    SaveLearnedPe(pe, path);
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  };
  // Trailing bytes.
  SaveLearnedPe(pe, path);
  std::filesystem::resize_file(path, 52);
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); },
                            {"longer than its header says", "expected 48 bytes", "got 52 bytes"});
  // Bad magic.
  patch(0, {'G', 'P', 'T', '2'});
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"magic is 'GPT2ncPE'", "expected 'posencPE'"});
  // Version 2.
  patch(8, {2});
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"version is 2, expected 1"});
  // dtype 1.
  patch(12, {1});
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"dtype is 1, expected 0 (float32)"});
  // max_seq_len 0.
  patch(16, {0});
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"max_seq_len is 0, expected >= 1"});
  // A NaN in row 1, channel 0 (element 2; float32 quiet NaN 0x7fc00000, little-endian).
  patch(32 + 4 * 2, {0x00, 0x00, 0xc0, 0x7f});
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"table[1, 0] is nan", "finite"});
  std::filesystem::remove(path);
  // Missing file.
  ExpectThrowsWith<IoError>([&] { LoadLearnedPe(path); }, {"cannot read", path.string()});
}

// ===== errors ==============================================================================================

TEST(LearnedPeErrors, OutOfRangePositionNamesPositionAndLimitAndWritesNothing) {
  const LearnedPositionalEmbedding pe = IndexTable(16, 2);
  std::vector<float> out(8, -9.0f);
  const std::vector<int64_t> too_big = {0, 3, 16, 1};
  ExpectThrowsWith<RangeError>([&] { LearnedPeForward(pe, too_big, out); },
                               {"position_ids[2] = 16 is outside the learned table [0, max_seq_len = 16)"});
  for (float v : out) EXPECT_EQ(v, -9.0f) << "nothing written before the throw";
  const std::vector<int64_t> negative = {-1, 0, 0, 0};
  ExpectThrowsWith<RangeError>([&] { LearnedPeForwardAdd(pe, negative, out); },
                               {"position_ids[0] = -1 is outside the learned table [0, max_seq_len = 16)"});
  for (float v : out) EXPECT_EQ(v, -9.0f);

  std::vector<float> dtable(32, 0.25f);
  const std::vector<float> dout(8, 1.0f);
  ExpectThrowsWith<RangeError>([&] { LearnedPeBackward(pe, too_big, dout, dtable); },
                               {"position_ids[2] = 16", "max_seq_len = 16"});
  for (float v : dtable) EXPECT_EQ(v, 0.25f) << "dtable untouched";

  ExpectThrowsWith<RangeError>([&] { pe.Row(17); }, {"position = 17", "max_seq_len = 16"});
}

TEST(LearnedPeErrors, OffsetPastTheTableNamesFirstBadPosition) {
  const LearnedPositionalEmbedding pe = IndexTable(16, 2);
  std::vector<float> two(4, 3.0f);
  // Decoding 2 tokens at cache length 15: position 16 does not exist (never clamped to 15).
  ExpectThrowsWith<RangeError>(
      [&] { LearnedPeForwardAdd(pe, 15, 2, two); },
      {"position offset + 1 = 16 is outside the learned table [0, max_seq_len = 16)", "offset = 15", "n_tokens = 2"});
  for (float v : two) EXPECT_EQ(v, 3.0f);
  ExpectThrowsWith<RangeError>([&] { LearnedPeForward(pe, 20, 2, two); },
                               {"position offset + 0 = 20", "max_seq_len = 16"});
  ExpectThrowsWith<RangeError>([&] { LearnedPeForward(pe, -1, 2, two); }, {"position offset + 0 = -1", "offset = -1"});
  ExpectThrowsWith<RangeError>([&] { LearnedPeForward(pe, std::numeric_limits<int64_t>::max(), 2, two); },
                               {"offset = 9223372036854775807"});
  std::vector<float> dtable(32, 0.0f);
  ExpectThrowsWith<RangeError>([&] { LearnedPeBackward(pe, 15, 2, two, dtable); }, {"= 16", "offset = 15"});
  ExpectThrowsWith<ShapeError>([&] { LearnedPeForward(pe, 0, -1, two); }, {"n_tokens must be >= 0, got -1"});
}

TEST(LearnedPeErrors, BadSizesAreConfigErrors) {
  ExpectThrowsWith<ConfigError>([] { LearnedPositionalEmbedding(0, 8); }, {"max_seq_len must be >= 1, got 0"});
  ExpectThrowsWith<ConfigError>([] { LearnedPositionalEmbedding(-3, 8); }, {"max_seq_len", "got -3"});
  ExpectThrowsWith<ConfigError>([] { LearnedPositionalEmbedding(16, 0); }, {"d_model must be >= 1, got 0"});
  ExpectThrowsWith<ConfigError>([] { LearnedPositionalEmbedding(16, -1); }, {"d_model", "got -1"});
  ExpectThrowsWith<ConfigError>([] { LearnedPositionalEmbedding(int64_t{1} << 40, int64_t{1} << 40); }, {"too large"});
}

TEST(LearnedPeErrors, MismatchedBuffersAreShapeErrors) {
  LearnedPositionalEmbedding pe = IndexTable(4, 3);
  const std::vector<int64_t> position_ids = {0, 1};
  std::vector<float> out(5);
  ExpectThrowsWith<ShapeError>([&] { LearnedPeForward(pe, position_ids, out); },
                               {"out has 5 floats", "n_tokens * d_model = 2 * 3"});
  std::vector<float> x(7);
  ExpectThrowsWith<ShapeError>([&] { LearnedPeForwardAdd(pe, 0, 2, x); }, {"x has 7 floats", "2 * 3"});
  const std::vector<float> dout(6, 1.0f);
  std::vector<float> dtable(11, 0.0f);
  ExpectThrowsWith<ShapeError>([&] { LearnedPeBackward(pe, position_ids, dout, dtable); },
                               {"dtable has 11 floats", "max_seq_len * d_model = 4 * 3"});
  ExpectThrowsWith<ShapeError>(
      [&] { LearnedPeBackward(pe, position_ids, std::span<const float>(dout).first(5), dtable); },
      {"dout has 5 floats"});
  ExpectThrowsWith<ShapeError>([&] { LearnedPeSgdStep(pe, dtable, 0.1f); }, {"dtable has 11 floats"});
}

TEST(LearnedPeErrors, BadHyperparametersAreConfigErrors) {
  LearnedPositionalEmbedding pe(2, 2);
  ExpectThrowsWith<ConfigError>([&] { InitLearnedPeNormal(pe, 1, -0.02); }, {"stddev", "got -0.02"});
  ExpectThrowsWith<ConfigError>([&] { InitLearnedPeNormal(pe, 1, std::numeric_limits<double>::quiet_NaN()); },
                                {"stddev", "got nan"});
  const std::vector<float> dtable(4, 1.0f);
  ExpectThrowsWith<ConfigError>([&] { LearnedPeSgdStep(pe, dtable, std::numeric_limits<float>::infinity()); },
                                {"learning_rate", "got inf"});
  for (float v : pe.table()) EXPECT_EQ(v, 0.0f) << "table untouched";
}

}  // namespace
}  // namespace posenc
