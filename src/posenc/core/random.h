// Seeded normal draws whose values are the same on every platform and standard library (weight init).
#pragma once

#include <cstdint>
#include <random>
#include <span>

namespace posenc {

/// Overwrites w with normal(0, stddev) values drawn from g, two at a time (Box-Muller, computed in double):
/// for each pair of consecutive elements (2j, 2j+1) draw a = g(), then b = g(), and set
///   u1 = ((a >> 11) + 1) * 2^-53  in (0, 1],   u2 = (b >> 11) * 2^-53  in [0, 1),   r = sqrt(-2 log u1),
///   w[2j] = float32(stddev * r * cos(2 pi u2)),   w[2j+1] = float32(stddev * r * sin(2 pi u2))
/// (the second value is dropped when the count is odd). std::mt19937_64's output is fixed by the C++ standard
/// and std::normal_distribution is not used (its algorithm differs between standard libraries); only libm's
/// last-bit rounding of log/sqrt/cos/sin in double remains, which the float32 rounding hides except in rare
/// near-ties. Errors: none (the caller validates stddev: finite, >= 0).
void FillNormal(std::span<float> w, std::mt19937_64& g, double stddev);

}  // namespace posenc
