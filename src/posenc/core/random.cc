#include "posenc/core/random.h"

#include <cmath>
#include <numbers>

namespace posenc {

void FillNormal(std::span<float> w, std::mt19937_64& g, double stddev) {
  constexpr double kTwoPow53 = 0x1p-53;
  for (std::size_t j = 0; j < w.size(); j += 2) {
    const uint64_t a = g();
    const uint64_t b = g();
    const double u1 = static_cast<double>((a >> 11) + 1) * kTwoPow53;  // (0, 1]: log(u1) is finite
    const double u2 = static_cast<double>(b >> 11) * kTwoPow53;        // [0, 1)
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double phi = 2.0 * std::numbers::pi * u2;
    w[j] = static_cast<float>(stddev * (r * std::cos(phi)));
    if (j + 1 < w.size()) w[j + 1] = static_cast<float>(stddev * (r * std::sin(phi)));
  }
}

}  // namespace posenc
