#include "posenc/core/threads.h"

#include <fmt/format.h>
#include <omp.h>

#include <cstdlib>
#include <string>

#include "posenc/core/errors.h"

namespace posenc {

int ResolveThreads(int requested, std::string_view field) {
  if (requested < 0 || requested > kMaxThreads) {
    throw ConfigError(fmt::format("{} must be in [0, {}] (0 = all cores; this machine has {}), got {}", field,
                                  kMaxThreads, omp_get_num_procs(), requested));
  }
  if (requested > 0) return requested;
  CheckOpenMpDefaultThreads();
  return omp_get_max_threads();
}

void CheckOpenMpDefaultThreads() {
  const int n = omp_get_max_threads();
  if (n <= kMaxThreads) return;
  const char* env = std::getenv("OMP_NUM_THREADS");
  throw ConfigError(fmt::format("{} asks for {} OpenMP threads; posenc runs at most {} (this machine has {} cores): "
                                "set OMP_NUM_THREADS to at most {}, or unset it",
                                env != nullptr ? fmt::format("OMP_NUM_THREADS={}", env) : std::string("OpenMP"), n,
                                kMaxThreads, omp_get_num_procs(), kMaxThreads));
}

}  // namespace posenc
