// Timing helpers shared by the benchmark suites (bench/*_suite.cc): clocks, medians, cache eviction and the
// machine facts each report prints. Header-only; used by benchmarks, never by the library.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/core/threads.h"

namespace posenc::bench {

/// Smallest STREAM array accepted: the arrays must outgrow the caches for the copy to measure memory, and a
/// zero-byte copy takes no time (its rate would print as inf).
inline constexpr int64_t kMinStreamBytes = int64_t{1} << 20;

/// The settings every suite shares, checked before any timing: threads in [0, kMaxThreads]; stream_bytes at
/// least 1 MiB, and its two copy arrays within the machine's memory.
/// Errors: ConfigError naming the flag and the value.
inline void ValidateSuiteSettings(int threads, int64_t stream_bytes) {
  ResolveThreads(threads, "--threads");
  if (stream_bytes < kMinStreamBytes) {
    throw ConfigError(fmt::format("--stream-bytes must be >= {} (1 MiB: the STREAM arrays must outgrow the caches, "
                                  "and a copy of nothing takes no time), got {}",
                                  kMinStreamBytes, stream_bytes));
  }
  RequireMemory(SaturatingMul(stream_bytes, 2), fmt::format("--stream-bytes {}", stream_bytes),
                "two STREAM arrays of that size");
}

using Clock = std::chrono::steady_clock;

/// Whether a case named `name` is selected by `filter`: a comma-separated list of substrings, any of which
/// may occur in the name ("decode,attention_L2048"); an empty filter selects every case.
inline bool MatchesFilter(const std::string& name, const std::string& filter) {
  if (filter.empty()) return true;
  size_t start = 0;
  while (start <= filter.size()) {
    const size_t comma = std::min(filter.find(',', start), filter.size());
    const std::string part = filter.substr(start, comma - start);
    if (!part.empty() && name.find(part) != std::string::npos) return true;
    start = comma + 1;
  }
  return false;
}

/// Seconds from a to b.
inline double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

/// Median of v (0 for an empty v).
inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : (n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
}

/// Evicts the caches (L3 here is 32 MiB) with a read-modify-write of 128 MiB, on the OpenMP threads, so a
/// cold case's data comes from DRAM.
inline void FlushCaches() {
  static std::vector<float> junk(size_t{32} << 20, 1.0f);
  float* p = junk.data();
  const int64_t n = static_cast<int64_t>(junk.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = p[i] * 0.5f + 0.5f;
}

/// The "model name" line of /proc/cpuinfo, or "unknown CPU".
inline std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

/// The 1-minute load average (other processes competing for the cores), or -1 if unknown.
inline double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return in ? l : -1.0;
}

/// Fills a result entry's "baselines" {name: GB/s}, "baseline_ns_per_call" {name: ns} and "ratios"
/// {name: gbps / baseline GB/s} from one case's baseline figures (every name of `gbps_by_name` must be in
/// `ns_by_name`).
inline void PutBaselines(nlohmann::json& e, double gbps, const std::map<std::string, double>& gbps_by_name,
                         const std::map<std::string, double>& ns_by_name) {
  e["baselines"] = nlohmann::json::object();
  e["baseline_ns_per_call"] = nlohmann::json::object();
  e["ratios"] = nlohmann::json::object();
  for (const auto& [name, baseline_gbps] : gbps_by_name) {
    e["baselines"][name] = baseline_gbps;
    e["baseline_ns_per_call"][name] = ns_by_name.at(name);
    e["ratios"][name] = gbps / baseline_gbps;
  }
}

/// s in single quotes for /bin/sh (embedded quotes escaped).
inline std::string ShellQuote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) q += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return q + "'";
}

/// Runs `python script SPEC` with `spec` written to a temporary file SPEC, and returns the JSON object the script
/// prints on its last line (anything before is Python's own chatter). Returns null, with a note starting with
/// `who` in `notes`, when the script cannot be started, prints no JSON object, or answers {"skipped": reason}
/// (e.g. torch is not importable).
inline nlohmann::json RunPythonJson(const std::string& python, const std::string& script, const nlohmann::json& spec,
                                    const std::string& who, std::vector<std::string>& notes) {
  char spec_path[] = "/tmp/posenc_bench_XXXXXX";
  const int fd = mkstemp(spec_path);
  if (fd < 0) {
    notes.push_back(who + " skipped: cannot create a temporary file");
    return nullptr;
  }
  const std::string text = spec.dump();
  const bool wrote = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!wrote) {
    std::remove(spec_path);
    notes.push_back(who + " skipped: cannot write the case list");
    return nullptr;
  }
  const std::string cmd = ShellQuote(python) + " " + ShellQuote(script) + " " + ShellQuote(spec_path) + " 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) {
    std::remove(spec_path);
    notes.push_back(who + " skipped: cannot start " + python);
    return nullptr;
  }
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  const int wait_status = pclose(pipe);
  const int status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  std::remove(spec_path);
  const size_t start = out.rfind("\n{");
  const std::string last = start == std::string::npos ? out : out.substr(start + 1);
  nlohmann::json answer = nlohmann::json::parse(last, nullptr, /*allow_exceptions=*/false);
  if (answer.is_discarded() || !answer.is_object()) {
    notes.push_back(fmt::format("{} skipped: `{}` exited with status {} and printed: {}", who, cmd, status,
                                out.substr(0, 400)));
    return nullptr;
  }
  if (answer.contains("skipped")) {
    notes.push_back(who + " skipped: " + answer["skipped"].get<std::string>());
    return nullptr;
  }
  return answer;
}

}  // namespace posenc::bench
