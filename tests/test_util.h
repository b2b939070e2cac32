// Helpers shared by the tests: reference-data loading and ulp distances.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace posenc::testing {

/// Parses tests/data/<name> (copies of the project's reference files; see tests/data/SOURCE.md).
inline nlohmann::json LoadTestJson(const std::string& name) {
  std::ifstream in(std::string(POSENC_TEST_DATA_DIR) + "/" + name);
  if (!in) throw std::runtime_error("cannot open test data " + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

/// Distance in units in the last place between two float32 values (0 if bit-equal; handles signs).
inline int64_t UlpDistance(float a, float b) {
  if (a == b) return 0;
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<int64_t>::max();
  auto ordered = [](float f) {
    int32_t i;
    std::memcpy(&i, &f, 4);
    return i < 0 ? static_cast<int64_t>(INT32_MIN) - i : static_cast<int64_t>(i);
  };
  const int64_t d = ordered(a) - ordered(b);
  return d < 0 ? -d : d;
}

/// One float32 ulp at the magnitude of x (the gap above |x|; for 0, the smallest normal's ulp).
inline double UlpOf(float x) {
  const float ax = std::fabs(x);
  return static_cast<double>(std::nextafter(ax, std::numeric_limits<float>::infinity()) - ax);
}

}  // namespace posenc::testing
