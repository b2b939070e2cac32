// Which kernels OpenBLAS runs on this CPU, and the selection of the right ones where its own detection falls back
// below the CPU's instruction set (OpenBLAS 0.3.21 takes its Prescott kernels on CPUs it does not know, e.g. Intel
// Xeon model 207, at a fifth of the sgemm rate of its SkylakeX kernels there).
#pragma once

#include <string>
#include <string_view>

namespace posenc {

/// The vector instruction level of a CPU or of a BLAS kernel set, lowest first.
enum class IsaLevel {
  kBaseline = 0,  // SSE2 / SSE3 (OpenBLAS's Prescott, Core2, Nehalem, ...)
  kAvx = 1,       // AVX (Sandybridge, Bulldozer ...)
  kAvx2 = 2,      // AVX2 + FMA (Haswell, Zen, Excavator)
  kAvx512 = 3,    // AVX-512 F/CD/BW/DQ/VL (SkylakeX, Cooperlake, SapphireRapids)
};

/// "baseline", "avx", "avx2" or "avx512".
std::string_view IsaLevelName(IsaLevel level);

/// The level of an OpenBLAS DYNAMIC_ARCH core name as openblas_get_corename returns it (case-insensitive;
/// unknown names count as kBaseline). Errors: none.
IsaLevel OpenBlasCoreLevel(std::string_view core);

/// This CPU's level as Highway's runtime detection sees it (HWY_AVX3 -> kAvx512, HWY_AVX2 -> kAvx2, else
/// kBaseline; AVX without AVX2 counts as baseline). Errors: none.
IsaLevel CpuIsaLevel();

/// The OpenBLAS core type to select on a CPU of level `cpu` when OpenBLAS runs `running`: "SkylakeX" (kAvx512)
/// or "Haswell" (kAvx2) if `running` is below `cpu`, else "" (keep). A core the user chose through
/// OPENBLAS_CORETYPE (`user_set`) is kept. Errors: none.
std::string OpenBlasCoreToSelect(std::string_view running, IsaLevel cpu, bool user_set);

/// OpenBLAS's core name now ("SkylakeX", "Prescott", ...) and its build line (openblas_get_config).
std::string OpenBlasCoreName();
std::string OpenBlasConfig();

/// Re-selects OpenBLAS's kernels as if OPENBLAS_CORETYPE = `core` had been set at start: sets the variable, runs
/// OpenBLAS's own DYNAMIC_ARCH selection again (gotoblas_dynamic_quit + gotoblas_dynamic_init, found with dlsym),
/// then restores the environment. Only while no BLAS call runs (posenc does it once at start). Returns false,
/// changing nothing, if this OpenBLAS has no DYNAMIC_ARCH selection (a build for one CPU, or another BLAS).
/// Errors: none.
bool SwitchOpenBlasCore(const std::string& core);

/// What the process start did (EnsureBlasCoreMatchesCpu).
struct BlasCoreSelection {
  std::string detected;      // OpenBLAS's own choice
  std::string running;       // the core running after the check
  IsaLevel cpu = IsaLevel::kBaseline;
  bool user_set = false;     // OPENBLAS_CORETYPE was set in the environment
  bool switched = false;     // running != detected because posenc selected it
  double switch_seconds = 0.0;
};

/// Once per process (thread-safe; also run by a static initializer of the library, before main): if OpenBLAS
/// runs a core below this CPU's level and OPENBLAS_CORETYPE was not set, selects OpenBlasCoreToSelect's core.
/// Returns what it found and did. Errors: none.
const BlasCoreSelection& EnsureBlasCoreMatchesCpu();

/// For the load line: "OpenBLAS 0.3.21 SkylakeX kernels (avx512 CPU)", with "; selected: OpenBLAS chose Prescott
/// on this CPU" when EnsureBlasCoreMatchesCpu switched, or "; below this CPU's avx512: OPENBLAS_CORETYPE=..."
/// when the user's choice is below the CPU.
std::string DescribeBlas();

}  // namespace posenc
