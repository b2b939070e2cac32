// Sizes that users choose (steps, head_dim, ctx, ...) are checked against the memory they would need
// before anything is allocated, so a typo is a clear error instead of std::bad_alloc or a swapping machine.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

/// Physical memory of this machine in bytes (sysconf _SC_PHYS_PAGES * _SC_PAGE_SIZE); 0 if unknown.
int64_t PhysicalMemoryBytes();

/// "1.5 GiB", "12 MiB", "512 bytes": a byte count for messages (binary units, 3 significant digits).
std::string FormatBytes(double bytes);

/// a * b for sizes >= 0, saturating at INT64_MAX instead of overflowing (the result then fails any memory
/// check). Errors: none.
int64_t SaturatingMul(int64_t a, int64_t b);

/// a + b for sizes >= 0, saturating at INT64_MAX.
int64_t SaturatingAdd(int64_t a, int64_t b);

/// Refuses work that would need more than the machine's physical memory.
/// Errors: ConfigError "<what> would need <bytes> (<how>), more than this machine's <total> of memory",
///         where `what` names the setting and its value ("`steps` 1000000000") and `how` says what is
///         allocated ("KV cache of 5 layers x 2 x steps x 64 floats"). Unknown physical memory: no check.
void RequireMemory(int64_t bytes, std::string_view what, std::string_view how);

/// The message for an allocation that failed (std::bad_alloc reaching the command line): "out of memory: an
/// allocation failed; this process may use <limit> (ulimit -v) ..." with the address-space limit (getrlimit
/// RLIMIT_AS) when one is set and the machine's physical memory, so the user sees which bound was met.
/// Errors: none.
std::string OutOfMemoryMessage();

}  // namespace posenc
