// Whether the build has MPI, and the error asking for it gives when it has none.
#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"
#include "posenc/dist/mpi_support.h"

namespace posenc {
namespace {

TEST(MpiSupportTest, RequireMpiMatchesTheBuild) {
  EXPECT_EQ(BuiltWithMpi(), POSENC_WITH_MPI != 0);
  if (BuiltWithMpi()) {
    EXPECT_NO_THROW(RequireMpi("--context-parallel"));
    return;
  }
  try {
    RequireMpi("--context-parallel");
    FAIL() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("--context-parallel needs posenc built with MPI"), std::string::npos);
  }
}

}  // namespace
}  // namespace posenc
