// Which SIMD targets the kernels were compiled for and which of them this CPU runs (Highway's runtime dispatch).
#pragma once

#include <string>
#include <vector>

namespace posenc::kernels {

/// Highway target names, best first ("AVX3_SPR", "AVX3", "AVX2", "SSE4", "SSSE3", "EMU128"/"SCALAR", ...).
struct KernelTargets {
  std::vector<std::string> compiled;  // HWY_TARGETS: every target the kernels were compiled for
  std::vector<std::string> usable;    // those this CPU supports (hwy::SupportedTargets())
  std::string dispatched;             // the one the dynamic dispatch runs here (the best usable one)
};

/// The kernels' targets in this process. Initialises Highway's dispatch if nothing has yet. Errors: none.
KernelTargets GetKernelTargets();

}  // namespace posenc::kernels
