#include "posenc/core/memory.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <limits>
#include <string>

#include "posenc/core/errors.h"

namespace posenc {

int64_t PhysicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page_size = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return SaturatingMul(pages, page_size);
}

std::string FormatBytes(double bytes) {
  static constexpr const char* kUnits[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 6) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? fmt::format("{:.0f} bytes", bytes) : fmt::format("{:.3g} {}", bytes, kUnits[unit]);
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (a <= 0 || b <= 0) return 0;
  return a > kMax / b ? kMax : a * b;
}

int64_t SaturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  return a > kMax - b ? kMax : a + b;
}

void RequireMemory(int64_t bytes, std::string_view what, std::string_view how) {
  const int64_t total = PhysicalMemoryBytes();
  if (total > 0 && bytes > total) {
    throw ConfigError(fmt::format("{} would need {} ({}), more than this machine's {} of memory", what,
                                  bytes == std::numeric_limits<int64_t>::max()
                                      ? std::string("more than 8 EiB")
                                      : FormatBytes(static_cast<double>(bytes)),
                                  how, FormatBytes(static_cast<double>(total))));
  }
}

std::string OutOfMemoryMessage() {
  std::string limit;
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    limit = fmt::format("this process may use {} of address space (ulimit -v {})",
                        FormatBytes(static_cast<double>(rl.rlim_cur)), rl.rlim_cur / 1024);
  } else {
    limit = "this process has no address-space limit (ulimit -v unlimited)";
  }
  const int64_t physical = PhysicalMemoryBytes();
  return fmt::format("out of memory: an allocation failed (std::bad_alloc); {}{}: raise the limit, or ask for "
                     "less (a smaller `ctx`, `steps`, `batch` or `threads`, `weights` file to keep the file's "
                     "encoded weights)",
                     limit,
                     physical > 0 ? fmt::format(", and the machine has {}", FormatBytes(static_cast<double>(physical)))
                                  : "");
}

}  // namespace posenc
