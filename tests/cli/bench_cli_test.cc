// `posenc bench`: it runs posenc-bench, the separate benchmark binary (the timed suites are not linked into
// posenc), and posenc-bench's argument errors are reported before any timing starts (no case is run).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <unistd.h>

#include "test_util.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;

#define POSENC_REQUIRE_BENCH()                                                                       \
  if (!POSENC_HAVE_BENCH) GTEST_SKIP() << "posenc-bench is not built (configured with POSENC_BUILD_BENCHMARKS=OFF)"

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(BenchCli, FilterMatchingNoCaseIsAnErrorNamingTheFilter) {
  POSENC_REQUIRE_BENCH();
  const testing::CliResult r = testing::RunPosenc("bench --filter no_such_case --no-torch --quiet");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--filter 'no_such_case' matches no benchmark case"), std::string::npos) << r.out;
}

TEST(BenchCli, RepsMustBePositive) {
  POSENC_REQUIRE_BENCH();
  const testing::CliResult r = testing::RunPosenc("bench --reps 0 --filter gather");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--reps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not in range 1 to"), std::string::npos) << r.out;
}

// The suites are in posenc-bench only: posenc holds none of their text, and `posenc bench ARGS` is posenc-bench
// ARGS (its help, with the options posenc itself does not have).
TEST(BenchCli, PosencRunsTheSeparateBenchBinary) {
  POSENC_REQUIRE_BENCH();
  const fs::path posenc = POSENC_CLI_PATH;
  const fs::path bench = posenc.parent_path() / "posenc-bench";
  ASSERT_TRUE(fs::is_regular_file(bench)) << bench;
  const std::string suite_text = "matches no benchmark case";
  EXPECT_EQ(ReadBytes(posenc).find(suite_text), std::string::npos) << "posenc links the benchmark suites";
  EXPECT_NE(ReadBytes(bench).find(suite_text), std::string::npos);
  const testing::CliResult help = testing::RunPosenc("bench --help");
  EXPECT_EQ(help.status, 0) << help.out;
  EXPECT_NE(help.out.find("posenc-bench"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--attention-reps"), std::string::npos) << help.out;
}

// A posenc without posenc-bench beside it (the main job's build, an install) says how to get it.
TEST(BenchCli, MissingBenchBinaryIsAnErrorSayingHowToBuildIt) {
  const fs::path dir = fs::temp_directory_path() / ("posenc_bench_missing_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path copy = dir / "posenc";
  fs::copy_file(POSENC_CLI_PATH, copy);
  fs::permissions(copy, fs::perms::owner_all);
  const std::string cmd = "'" + copy.string() + "' bench --filter gather 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int raw = pclose(pipe);
  fs::remove_all(dir);
  EXPECT_TRUE(WIFEXITED(raw) && WEXITSTATUS(raw) == 1) << out;
  EXPECT_NE(out.find("posenc bench runs posenc-bench, which is not beside this posenc"), std::string::npos) << out;
  EXPECT_NE(out.find("posenc-bench is not installed"), std::string::npos) << out;
  EXPECT_NE(out.find("-DPOSENC_BUILD_BENCHMARKS=ON"), std::string::npos) << out;
}

}  // namespace
}  // namespace posenc
