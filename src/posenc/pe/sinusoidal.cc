// Sinusoidal absolute positional encoding: scalar reference path. See sinusoidal.h for the math.
#include "posenc/pe/sinusoidal.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>

#include "posenc/core/errors.h"
#include "posenc/kernels/pe_kernels.h"

namespace posenc {
namespace {

// Channel index of the sin and cos value of pair i in one row.
struct PairChannels {
  int64_t sin_channel;
  int64_t cos_channel;
};

PairChannels ChannelsOfPair(SinusoidalLayout layout, int64_t half, int64_t i) {
  if (layout == SinusoidalLayout::kInterleaved) return {2 * i, 2 * i + 1};
  return {i, half + i};
}

// Checks that a buffer of `size` floats holds exactly n_rows rows of d_model floats.
void CheckRows(std::string_view what, std::size_t size, std::size_t n_rows, int64_t d_model) {
  const std::size_t d = static_cast<std::size_t>(d_model);
  if (n_rows > std::numeric_limits<std::size_t>::max() / d || size != n_rows * d) {
    throw ShapeError(
        fmt::format("{} has {} floats, expected n_positions * d_model = {} * {}", what, size, n_rows, d_model));
  }
}

// One row PE(position), each value computed in double and rounded once to float32, in the given layout.
// row[d_model].
void RowF32(const SinusoidalParams& params, const std::vector<double>& omega, int64_t position, float* row) {
  const int64_t half = params.d_model / 2;
  const double p = static_cast<double>(position);
  for (int64_t i = 0; i < half; ++i) {
    const double angle = p * omega[static_cast<std::size_t>(i)];  // radians
    const PairChannels ch = ChannelsOfPair(params.layout, half, i);
    row[ch.sin_channel] = static_cast<float>(std::sin(angle));  // the one rounding
    row[ch.cos_channel] = static_cast<float>(std::cos(angle));
  }
}

// Rows are built (and, for AddSinusoidal, added) in blocks of this many tokens: 16 rows of d_model 4096 are
// 256 KiB of scratch, which stays in L2 between the build and the add.
constexpr int64_t kRowsPerBlock = 16;

// Calls that evaluate at least this many (sin, cos) pairs (n_tokens * d_model / 2) split their blocks over
// OpenMP threads; the libm calls dominate (tens of ns per pair), so 2^15 pairs is about a millisecond of work.
constexpr int64_t kParallelMinPairs = int64_t{1} << 15;

// Threads for n_tokens rows of d_model: 1 for small calls, inside a parallel region, or on the scalar path.
int ThreadsForRows(std::size_t n_tokens, int64_t d_model) {
  const int64_t pairs = static_cast<int64_t>(n_tokens) * (d_model / 2);
  if (pairs < kParallelMinPairs || omp_in_parallel() || kernels::GetPeKernelPath() == kernels::PeKernelPath::kScalar) {
    return 1;
  }
  const int64_t blocks = (static_cast<int64_t>(n_tokens) + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<int>(std::min<int64_t>({omp_get_max_threads(), pairs / kParallelMinPairs, blocks}));
}

// For each block [t0, t1) of at most kRowsPerBlock tokens, rows(t0, t1) is called once; blocks are spread over
// `threads` OpenMP threads (1: in order, on the caller). Every row's values depend on its position only, so
// the split never changes a bit.
template <typename Fn>
void ForEachBlock(std::size_t n_tokens, int threads, Fn rows) {
  const int64_t n = static_cast<int64_t>(n_tokens);
  const int64_t n_blocks = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  if (threads <= 1) {
    for (int64_t b = 0; b < n_blocks; ++b) rows(b * kRowsPerBlock, std::min(n, (b + 1) * kRowsPerBlock));
    return;
  }
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads)
  for (int64_t b = 0; b < n_blocks; ++b) rows(b * kRowsPerBlock, std::min(n, (b + 1) * kRowsPerBlock));
}

}  // namespace

void ValidateSinusoidalParams(const SinusoidalParams& params) {
  if (params.d_model < 2) {
    throw ConfigError(fmt::format("d_model must be >= 2 (one (sin, cos) pair at least), got {}", params.d_model));
  }
  if (params.d_model % 2 != 0) {
    throw ConfigError(fmt::format(
        "d_model must be even: sinusoidal channels come in (sin, cos) pairs that share one frequency, got {}",
        params.d_model));
  }
  if (!std::isfinite(params.base) || params.base <= 1.0) {
    throw ConfigError(fmt::format(
        "base (max_period) must be a finite number > 1 so that frequencies decay from 1, got {}", params.base));
  }
}

std::vector<double> SinusoidalFrequencies(const SinusoidalParams& params) {
  ValidateSinusoidalParams(params);
  const int64_t half = params.d_model / 2;
  // kHalfMinusOne: fairseq divides by (half - 1), which is 0 for d_model = 2 (0/0 = NaN for i = 0).
  // Clamping to 1 keeps omega_0 = base^0 = 1 (d = 2 would otherwise divide 0 by 0).
  const int64_t divisor = params.divisor == SinusoidalDivisor::kHalf ? half : std::max<int64_t>(half - 1, 1);
  std::vector<double> omega(static_cast<std::size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    // i / half is the correctly rounded 2i/d_model; one pow, no exp(log(...)) reformulation.
    const double exponent = static_cast<double>(i) / static_cast<double>(divisor);
    omega[static_cast<std::size_t>(i)] = std::pow(params.base, -exponent);
  }
  return omega;
}

void SinusoidalTable(const SinusoidalParams& params, std::span<const int64_t> position_ids, std::span<float> out) {
  const std::vector<double> omega = SinusoidalFrequencies(params);  // validates params
  CheckRows("out", out.size(), position_ids.size(), params.d_model);
  const int64_t d = params.d_model;
  ForEachBlock(position_ids.size(), ThreadsForRows(position_ids.size(), d), [&](int64_t t0, int64_t t1) {
    for (int64_t r = t0; r < t1; ++r) {
      RowF32(params, omega, position_ids[static_cast<std::size_t>(r)], out.data() + r * d);
    }
  });
}

std::vector<float> SinusoidalTable(const SinusoidalParams& params, std::span<const int64_t> position_ids) {
  ValidateSinusoidalParams(params);
  std::vector<float> out(position_ids.size() * static_cast<std::size_t>(params.d_model));
  SinusoidalTable(params, position_ids, out);
  return out;
}

void AddSinusoidal(const SinusoidalParams& params, std::span<const int64_t> position_ids, std::span<float> x) {
  const std::vector<double> omega = SinusoidalFrequencies(params);  // validates params
  CheckRows("x", x.size(), position_ids.size(), params.d_model);
  // x [n_tokens, d_model] += rows [block, d_model]: each block's rows are built in float32 (as SinusoidalTable),
  // then added by the PE kernel (one float32 addition per element; SIMD or the scalar reference, same bits).
  const int64_t d = params.d_model;
  ForEachBlock(position_ids.size(), ThreadsForRows(position_ids.size(), d), [&](int64_t t0, int64_t t1) {
    std::vector<float> rows(static_cast<std::size_t>((t1 - t0) * d));  // [t1 - t0, d_model]
    for (int64_t t = t0; t < t1; ++t) {
      RowF32(params, omega, position_ids[static_cast<std::size_t>(t)], rows.data() + (t - t0) * d);
    }
    kernels::PeRowsKernel({.op = kernels::PeRowsOp::kGatherAdd,
                           .n_tokens = t1 - t0,
                           .d_model = d,
                           .tokens = x.data() + t0 * d,
                           .token_stride = d,
                           .table = rows.data(),
                           .table_stride = d,
                           .rows = nullptr,
                           .row_offset = 0});
  });
}

std::vector<double> SinusoidalShiftMatrix(const SinusoidalParams& params, int64_t k) {
  const std::vector<double> omega = SinusoidalFrequencies(params);  // validates params
  const int64_t d = params.d_model;
  const int64_t half = d / 2;
  std::vector<double> m(static_cast<std::size_t>(d * d), 0.0);
  auto at = [&](int64_t r, int64_t c) -> double& { return m[static_cast<std::size_t>(r * d + c)]; };
  for (int64_t i = 0; i < half; ++i) {
    const double a = static_cast<double>(k) * omega[static_cast<std::size_t>(i)];  // radians
    const double ca = std::cos(a), sa = std::sin(a);
    const PairChannels ch = ChannelsOfPair(params.layout, half, i);
    at(ch.sin_channel, ch.sin_channel) = ca;  // sin(x+a) = sin x cos a + cos x sin a
    at(ch.sin_channel, ch.cos_channel) = sa;
    at(ch.cos_channel, ch.sin_channel) = -sa;  // cos(x+a) = cos x cos a - sin x sin a
    at(ch.cos_channel, ch.cos_channel) = ca;
  }
  return m;
}

}  // namespace posenc
