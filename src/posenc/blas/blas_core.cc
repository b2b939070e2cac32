#include "posenc/blas/blas_core.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>

#include <cblas.h>

#include <fmt/format.h>

#include "hwy/targets.h"

namespace posenc {
namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string Trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return std::string(s);
}

// Selects once, before main: the library's other objects call BLAS only from main on.
[[maybe_unused]] const bool kSelectedAtStart = (EnsureBlasCoreMatchesCpu(), true);

}  // namespace

std::string_view IsaLevelName(IsaLevel level) {
  switch (level) {
    case IsaLevel::kBaseline: return "baseline";
    case IsaLevel::kAvx: return "avx";
    case IsaLevel::kAvx2: return "avx2";
    case IsaLevel::kAvx512: return "avx512";
  }
  return "unknown";
}

IsaLevel OpenBlasCoreLevel(std::string_view core) {
  const std::string c = Lower(core);
  for (const char* name : {"skylakex", "cooperlake", "sapphirerapids"}) {
    if (c == name) return IsaLevel::kAvx512;
  }
  for (const char* name : {"haswell", "zen", "excavator"}) {
    if (c == name) return IsaLevel::kAvx2;
  }
  for (const char* name : {"sandybridge", "bulldozer", "piledriver", "steamroller"}) {
    if (c == name) return IsaLevel::kAvx;
  }
  return IsaLevel::kBaseline;
}

IsaLevel CpuIsaLevel() {
  const int64_t targets = hwy::SupportedTargets();
  if ((targets & HWY_AVX3) != 0) return IsaLevel::kAvx512;
  if ((targets & HWY_AVX2) != 0) return IsaLevel::kAvx2;
  return IsaLevel::kBaseline;
}

std::string OpenBlasCoreToSelect(std::string_view running, IsaLevel cpu, bool user_set) {
  if (user_set || OpenBlasCoreLevel(running) >= cpu) return "";
  switch (cpu) {
    case IsaLevel::kAvx512: return "SkylakeX";
    case IsaLevel::kAvx2: return "Haswell";
    default: return "";
  }
}

std::string OpenBlasCoreName() { return Trim(openblas_get_corename()); }
std::string OpenBlasConfig() { return Trim(openblas_get_config()); }

bool SwitchOpenBlasCore(const std::string& core) {
  using Fn = void (*)();
  const auto quit = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_quit"));
  const auto init = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "gotoblas_dynamic_init"));
  if (quit == nullptr || init == nullptr) return false;
  const char* old = std::getenv("OPENBLAS_CORETYPE");
  const std::optional<std::string> saved = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  quit();
  init();  // reads OPENBLAS_CORETYPE (unknown names: OpenBLAS's own detection)
  if (saved) {
    setenv("OPENBLAS_CORETYPE", saved->c_str(), 1);
  } else {
    unsetenv("OPENBLAS_CORETYPE");
  }
  return true;
}

const BlasCoreSelection& EnsureBlasCoreMatchesCpu() {
  static BlasCoreSelection selection;
  static std::once_flag once;
  std::call_once(once, [] {
    selection.detected = OpenBlasCoreName();
    selection.cpu = CpuIsaLevel();
    selection.user_set = std::getenv("OPENBLAS_CORETYPE") != nullptr;
    const std::string want = OpenBlasCoreToSelect(selection.detected, selection.cpu, selection.user_set);
    if (!want.empty()) {
      const auto t0 = std::chrono::steady_clock::now();
      selection.switched = SwitchOpenBlasCore(want) && OpenBlasCoreName() != selection.detected;
      selection.switch_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    selection.running = OpenBlasCoreName();
  });
  return selection;
}

std::string DescribeBlas() {
  const BlasCoreSelection& s = EnsureBlasCoreMatchesCpu();
  const std::string running = OpenBlasCoreName();
  std::string text = fmt::format("{} {} kernels ({} CPU)", Trim(OPENBLAS_VERSION), running, IsaLevelName(s.cpu));
  if (s.switched && running == s.running) {
    text += fmt::format("; selected by posenc: OpenBLAS chose {} on this CPU", s.detected);
  } else if (OpenBlasCoreLevel(running) < s.cpu) {
    text += fmt::format("; below this CPU's {}{}", IsaLevelName(s.cpu),
                        s.user_set ? " (OPENBLAS_CORETYPE is set)" : ": sgemm runs at a fraction of its speed");
  }
  return text;
}

}  // namespace posenc
