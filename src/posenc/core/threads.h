// Thread counts given by users (--threads): one bound for every OpenMP region posenc opens.
#pragma once

#include <string_view>

namespace posenc {

/// Largest thread count accepted anywhere (eval, demo compare, bench). OpenMP runtimes allocate a stack per
/// thread up front (libgomp crashes inside its thread pool at 100000 threads); 1024 is far above any machine
/// posenc targets and far below where a runtime gives up.
inline constexpr int kMaxThreads = 1024;

/// The thread count an OpenMP region should use: `requested` if > 0, else the runtime's default
/// (omp_get_max_threads(), i.e. all cores or OMP_NUM_THREADS), checked by CheckOpenMpDefaultThreads.
/// Errors: ConfigError "<field> must be in [0, 1024] (0 = all cores), got N" for a negative or larger count;
///         CheckOpenMpDefaultThreads's error.
int ResolveThreads(int requested, std::string_view field);

/// Checks the thread count OpenMP would give a region that names none (OMP_NUM_THREADS, else the hardware),
/// before any team is started: at most kMaxThreads. Call it once at start-up (the CLI does, before parsing);
/// every parallel region without an explicit count inherits it.
/// Errors: ConfigError "OMP_NUM_THREADS=100000 asks for 100000 OpenMP threads; posenc runs at most 1024 (this
///         machine has 16 cores): set OMP_NUM_THREADS to at most 1024, or unset it".
void CheckOpenMpDefaultThreads();

}  // namespace posenc
