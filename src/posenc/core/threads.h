// Thread counts given by users (the `threads` options): one bound for every OpenMP region posenc opens.
#pragma once

#include <string_view>

namespace posenc {

/// Largest thread count accepted anywhere (eval, demo compare, bench). OpenMP runtimes allocate a stack per
/// thread up front (libgomp crashes inside its thread pool at 100000 threads); 1024 is far above any machine
/// posenc targets and far below where a runtime gives up.
inline constexpr int kMaxThreads = 1024;

/// The thread count an OpenMP region should use: `requested` if > 0, else the runtime's default
/// (omp_get_max_threads(), i.e. all cores or OMP_NUM_THREADS), checked by CheckOpenMpDefaultThreads, and
/// proven startable by RequireThreadsStartable.
/// Errors: ConfigError "<field> must be in [0, 1024] (0 = all cores), got N" for a negative or larger count;
///         CheckOpenMpDefaultThreads's and RequireThreadsStartable's errors.
int ResolveThreads(int requested, std::string_view field);

/// Proves that a team of `n` threads can start, before OpenMP tries: n - 1 threads (the caller is the
/// first) are created with the default thread attributes that libgomp uses (stack size = ulimit -s, or
/// OMP_STACKSIZE / GOMP_STACKSIZE when set), held alive together, then joined. libgomp itself ends the
/// process with "libgomp: Thread creation failed" and no word of which limit was met. A count proven once
/// is not probed again (the check costs a few microseconds per thread the first time).
/// `what` names where the count came from ("`threads` 1000", "OMP_NUM_THREADS=64").
/// Errors: ConfigError "cannot start <n> threads (<what>): thread <i> failed (pthread_create: <reason>);
///         each reserves a stack of <size> (ulimit -s ...), this process may use <limit> of address space
///         (ulimit -v ...) and <procs> processes (ulimit -u ...): ask for fewer threads (--threads), or raise
///         the limit".
void RequireThreadsStartable(int n, std::string_view what);

/// Checks the thread count OpenMP would give a region that names none (OMP_NUM_THREADS, else the hardware),
/// before any team is started: at most kMaxThreads, and startable (RequireThreadsStartable). Call it once at start-up (the CLI does, before parsing);
/// every parallel region without an explicit count inherits it.
/// Errors: ConfigError "OMP_NUM_THREADS=100000 asks for 100000 OpenMP threads; posenc runs at most 1024 (this
///         machine has 16 cores): set OMP_NUM_THREADS to at most 1024, or unset it";
///         RequireThreadsStartable's error.
void CheckOpenMpDefaultThreads();

/// Sets the calling thread's OpenMP default team size (omp_set_num_threads) to `n` for the scope and restores the
/// previous one after: a region inside that names no count, or takes ResolveThreads(0), uses n threads. n <= 0
/// leaves the default as it is. Errors: none.
class ScopedDefaultThreads {
 public:
  explicit ScopedDefaultThreads(int n);
  ~ScopedDefaultThreads();
  ScopedDefaultThreads(const ScopedDefaultThreads&) = delete;
  ScopedDefaultThreads& operator=(const ScopedDefaultThreads&) = delete;

 private:
  int saved_;
};

}  // namespace posenc
