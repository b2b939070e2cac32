// `posenc bench` argument errors: they must be reported before any timing starts (no case is run).
#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace posenc {
namespace {

TEST(BenchCli, FilterMatchingNoCaseIsAnErrorNamingTheFilter) {
  const testing::CliResult r = testing::RunPosenc("bench --filter no_such_case --no-torch --quiet");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--filter 'no_such_case' matches no benchmark case"), std::string::npos) << r.out;
}

TEST(BenchCli, RepsMustBePositive) {
  const testing::CliResult r = testing::RunPosenc("bench --reps 0 --filter gather");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("--reps"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("not in range 1 to"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace posenc
