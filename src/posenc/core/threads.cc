#include "posenc/core/threads.h"

#include <fmt/format.h>
#include <omp.h>

#include "posenc/core/errors.h"

namespace posenc {

int ResolveThreads(int requested, std::string_view field) {
  if (requested < 0 || requested > kMaxThreads) {
    throw ConfigError(fmt::format("{} must be in [0, {}] (0 = all cores; this machine has {}), got {}", field,
                                  kMaxThreads, omp_get_num_procs(), requested));
  }
  return requested > 0 ? requested : omp_get_max_threads();
}

}  // namespace posenc
