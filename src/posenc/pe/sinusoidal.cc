// Sinusoidal absolute positional encoding: scalar reference path. See sinusoidal.h for the math.
#include "posenc/pe/sinusoidal.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string_view>

#include "posenc/core/errors.h"

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

// One row PE(position) in float64, in the given layout. row[d_model].
void RowF64(const SinusoidalParams& params, const std::vector<double>& omega, int64_t position, double* row) {
  const int64_t half = params.d_model / 2;
  const double p = static_cast<double>(position);
  for (int64_t i = 0; i < half; ++i) {
    const double angle = p * omega[static_cast<std::size_t>(i)];  // radians
    const PairChannels ch = ChannelsOfPair(params.layout, half, i);
    row[ch.sin_channel] = std::sin(angle);
    row[ch.cos_channel] = std::cos(angle);
  }
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
  // Clamping to 1 keeps omega_0 = base^0 = 1 (BR-31).
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
  const std::size_t d = static_cast<std::size_t>(params.d_model);
  std::vector<double> row(d);
  for (std::size_t r = 0; r < position_ids.size(); ++r) {
    RowF64(params, omega, position_ids[r], row.data());
    float* dst = out.data() + r * d;
    for (std::size_t c = 0; c < d; ++c) dst[c] = static_cast<float>(row[c]);  // the one rounding
  }
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
  const std::size_t d = static_cast<std::size_t>(params.d_model);
  std::vector<double> row(d);
  for (std::size_t t = 0; t < position_ids.size(); ++t) {
    RowF64(params, omega, position_ids[t], row.data());
    float* dst = x.data() + t * d;
    for (std::size_t c = 0; c < d; ++c) dst[c] += static_cast<float>(row[c]);  // round PE, then add in f32
  }
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
