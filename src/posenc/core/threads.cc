#include "posenc/core/threads.h"

#include <fmt/format.h>
#include <omp.h>
#include <pthread.h>
#include <sys/resource.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"

namespace posenc {
namespace {

// The largest team proven startable so far in this process.
std::atomic<int> g_proven_threads{1};

// OMP_STACKSIZE / GOMP_STACKSIZE as OpenMP reads it: a number with an optional B, K, M or G suffix (K when
// none). 0 when unset or not a size (libgomp then uses the default attributes too, or refuses it itself).
size_t OpenMpStackSize() {
  for (const char* name : {"OMP_STACKSIZE", "GOMP_STACKSIZE"}) {
    const char* env = std::getenv(name);
    if (env == nullptr) continue;
    char* end = nullptr;
    errno = 0;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (errno != 0 || end == env) return 0;
    while (*end == ' ') ++end;
    unsigned long long unit = 1024;
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'B': unit = 1; break;
      case 'K': unit = 1024; break;
      case 'M': unit = 1024ull * 1024; break;
      case 'G': unit = 1024ull * 1024 * 1024; break;
      case '\0': break;
      default: return 0;
    }
    return static_cast<size_t>(SaturatingMul(static_cast<int64_t>(v), static_cast<int64_t>(unit)));
  }
  return 0;
}

// "1.43 GiB of address space (ulimit -v 1500000)", "unlimited processes (ulimit -u unlimited)".
std::string LimitText(int resource, const char* flag, const char* noun, bool bytes) {
  struct rlimit rl;
  if (::getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) {
    return fmt::format("unlimited {} ({} unlimited)", noun, flag);
  }
  if (!bytes) return fmt::format("{} {} ({} {})", rl.rlim_cur, noun, flag, rl.rlim_cur);
  return fmt::format("{} {} ({} {})", FormatBytes(static_cast<double>(rl.rlim_cur)), noun, flag, rl.rlim_cur / 1024);
}

void* ProbeThreadBody(void*) { return nullptr; }

}  // namespace

int ResolveThreads(int requested, std::string_view field) {
  if (requested < 0 || requested > kMaxThreads) {
    throw ConfigError(fmt::format("{} must be in [0, {}] (0 = all cores; this machine has {}), got {}", field,
                                  kMaxThreads, omp_get_num_procs(), requested));
  }
  if (requested > 0) {
    RequireThreadsStartable(requested, fmt::format("{} = {}", field, requested));
    return requested;
  }
  CheckOpenMpDefaultThreads();
  return omp_get_max_threads();
}

void RequireThreadsStartable(int n, std::string_view what) {
  if (n <= g_proven_threads.load(std::memory_order_relaxed)) return;
  pthread_attr_t attr;
  if (::pthread_attr_init(&attr) != 0) return;  // no attributes: nothing to probe with, OpenMP will say
  const size_t stack = OpenMpStackSize();
  if (stack > 0) ::pthread_attr_setstacksize(&attr, stack);
  size_t stack_used = 0;
  ::pthread_attr_getstacksize(&attr, &stack_used);
  std::vector<pthread_t> started;
  started.reserve(static_cast<size_t>(n));
  int failure = 0;
  for (int i = 1; i < n; ++i) {
    pthread_t t;
    failure = ::pthread_create(&t, &attr, ProbeThreadBody, nullptr);
    if (failure != 0) break;
    started.push_back(t);
  }
  for (pthread_t t : started) ::pthread_join(t, nullptr);
  ::pthread_attr_destroy(&attr);
  if (failure == 0) {
    int proven = g_proven_threads.load(std::memory_order_relaxed);
    while (proven < n && !g_proven_threads.compare_exchange_weak(proven, n, std::memory_order_relaxed)) {
    }
    return;
  }
  struct rlimit stack_limit;
  std::string stack_source = "the C library's default";
  if (stack > 0) {
    stack_source = std::getenv("OMP_STACKSIZE") != nullptr ? fmt::format("OMP_STACKSIZE={}", std::getenv("OMP_STACKSIZE"))
                                                           : fmt::format("GOMP_STACKSIZE={}", std::getenv("GOMP_STACKSIZE"));
  } else if (::getrlimit(RLIMIT_STACK, &stack_limit) == 0 && stack_limit.rlim_cur != RLIM_INFINITY) {
    stack_source = fmt::format("ulimit -s {}", stack_limit.rlim_cur / 1024);
  }
  throw ConfigError(fmt::format(
      "cannot start {} threads ({}): thread {} failed (pthread_create: {}); each thread reserves a stack of {} "
      "(from {}), and this process may use {} and {}: ask for fewer threads (`threads`), or raise the limit",
      n, what, started.size() + 2, std::strerror(failure), FormatBytes(static_cast<double>(stack_used)),
      stack_source, LimitText(RLIMIT_AS, "ulimit -v", "of address space", true),
      LimitText(RLIMIT_NPROC, "ulimit -u", "processes", false)));
}

void CheckOpenMpDefaultThreads() {
  const int n = omp_get_max_threads();
  const char* env = std::getenv("OMP_NUM_THREADS");
  const std::string source = env != nullptr ? fmt::format("OMP_NUM_THREADS={}", env)
                                            : fmt::format("OpenMP's default, all {} cores", omp_get_num_procs());
  if (n > kMaxThreads) {
    throw ConfigError(fmt::format("{} asks for {} OpenMP threads; posenc runs at most {} (this machine has {} cores): "
                                  "set OMP_NUM_THREADS to at most {}, or unset it",
                                  env != nullptr ? source : std::string("OpenMP"), n, kMaxThreads,
                                  omp_get_num_procs(), kMaxThreads));
  }
  RequireThreadsStartable(n, source);
}

ScopedDefaultThreads::ScopedDefaultThreads(int n) : saved_(omp_get_max_threads()) {
  if (n > 0) omp_set_num_threads(n);
}

ScopedDefaultThreads::~ScopedDefaultThreads() { omp_set_num_threads(saved_); }

}  // namespace posenc
