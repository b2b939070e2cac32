// Thread counts given by users (--threads): one bound for every OpenMP region posenc opens.
#pragma once

#include <string_view>

namespace posenc {

/// Largest thread count accepted anywhere (eval, demo compare, bench). OpenMP runtimes allocate a stack per
/// thread up front (libgomp crashes inside its thread pool at 100000 threads); 1024 is far above any machine
/// posenc targets and far below where a runtime gives up.
inline constexpr int kMaxThreads = 1024;

/// The thread count an OpenMP region should use: `requested` if > 0, else the runtime's default
/// (omp_get_max_threads(), i.e. all cores or OMP_NUM_THREADS).
/// Errors: ConfigError "<field> must be in [0, 1024] (0 = all cores), got N" for a negative or larger count.
int ResolveThreads(int requested, std::string_view field);

}  // namespace posenc
