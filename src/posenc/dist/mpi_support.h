// Whether this build of posenc has the MPI transport (dist/mpi/), and the error for asking for it without.
#pragma once

#include <string_view>

namespace posenc {

/// True when posenc was built with MPI (CMake option POSENC_WITH_MPI, on when CMake finds MPI).
bool BuiltWithMpi();

/// Throws ConfigError when the build has no MPI, naming the feature asked for, e.g. "`context_parallel` needs
/// posenc built with MPI (configure with -DPOSENC_WITH_MPI=ON and libopenmpi-dev installed)". No-op otherwise.
void RequireMpi(std::string_view feature);

}  // namespace posenc
