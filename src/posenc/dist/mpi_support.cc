#include "posenc/dist/mpi_support.h"

#include <fmt/format.h>

#include "posenc/core/errors.h"

#ifndef POSENC_WITH_MPI
#error "POSENC_WITH_MPI must be defined to 0 or 1 by the build"
#endif

namespace posenc {

bool BuiltWithMpi() { return POSENC_WITH_MPI != 0; }

void RequireMpi(std::string_view feature) {
  if (BuiltWithMpi()) return;
  throw ConfigError(fmt::format("{} needs posenc built with MPI, and this build has none (install libopenmpi-dev "
                                "and openmpi-bin, configure with -DPOSENC_WITH_MPI=ON, and run under mpirun)",
                                feature));
}

}  // namespace posenc
