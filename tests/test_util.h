// Helpers shared by the tests: reference-data loading and ulp distances.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace posenc::testing {

/// A file's whole contents ("" when it cannot be read).
inline std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

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

/// n draws of a standard normal from std::mt19937(seed) (test inputs only; not portable across standard
/// libraries, which is fine for inputs whose expected values are computed in the same run).
inline std::vector<float> RandomNormal(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

/// True in the sanitizer build (compiled with POSENC_TEST_SMALL_ORACLE) or with POSENC_TEST_SMALL_ORACLE=1 in the
/// environment: the oracle tests, ~10x slower there, then check fewer rows over the same code paths.
inline bool SmallOracle() {
#ifdef POSENC_TEST_SMALL_ORACLE
  return true;
#else
  const char* v = std::getenv("POSENC_TEST_SMALL_ORACLE");
  return v != nullptr && std::string(v) == "1";
#endif
}

/// Expects `fn` to throw E (or a subclass) whose message contains every string of `parts`; a failure names
/// the missing part and prints the message.
template <typename E, typename F>
void ExpectThrowWith(F&& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    const std::string what = e.what();
    for (const std::string& p : parts) EXPECT_NE(what.find(p), std::string::npos) << "'" << p << "' in: " << what;
  }
}

/// Exit status and standard output of one run of the posenc binary.
struct CliResult {
  int status = -1;  // exit status; -1 if it did not exit normally
  std::string out;  // stdout (plus stderr if `redirect` merges it)
};

/// Runs `cd <dir> && <env> <posenc> <args> <redirect>` through the shell. `redirect` is a shell
/// redirection for stderr, e.g. "2>&1" (merge), "2>/dev/null" or "2>" + file.
inline CliResult RunPosenc(const std::string& args, const std::string& redirect = "2>&1",
                           const std::string& env = "", const std::string& dir = ".") {
  const std::string cmd =
      "cd '" + dir + "' && " + env + " '" + std::string(POSENC_CLI_PATH) + "' " + args + " " + redirect;
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed: " + cmd);
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  const int raw = pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  return r;
}

}  // namespace posenc::testing
