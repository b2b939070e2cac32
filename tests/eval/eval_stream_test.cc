// A streaming eval interrupted and killed mid-run: rows reach the JSON as they finish (written atomically, so a
// killed run leaves a readable file), Ctrl-C (SIGINT) keeps the finished rows and exits 130, and --resume
// completes the run with the same numbers, bit for bit, as an uninterrupted one.
#include <gtest/gtest.h>

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace posenc {
namespace {

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("posenc_eval_stream_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs `sh -c script` and returns its stdout.
std::string Shell(const std::string& script) {
  FILE* pipe = popen(script.c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed");
  std::string out;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) out.append(buf.data(), n);
  pclose(pipe);
  return out;
}

// Enough rows (none of them reused) that a signal sent once the first row is in the file lands mid-run.
const std::string kArgs =
    "eval --ctx 256,512 --methods none,linear,ntk,yarn,dynamic-hf,dynamic --factor 3 --tokens 2048 --threads 1";

// Starts the eval in the background, waits until the JSON holds a row, sends `signal`, waits; prints the status.
std::string RunAndSignal(const std::string& json, const std::string& err, const std::string& signal) {
  const std::string posenc = POSENC_CLI_PATH;
  return Shell("'" + posenc + "' " + kArgs + " --json '" + json + "' > /dev/null 2> '" + err + "' & p=$!; i=0; " +
               "while ! grep -q '\"ctx\"' '" + json + "' 2>/dev/null; do sleep 0.02; i=$((i+1)); " +
               "[ $i -gt 3000 ] && break; done; kill -" + signal + " $p; wait $p; echo \"status=$?\"");
}

void ExpectSameRows(const nlohmann::json& got, const nlohmann::json& want) {
  ASSERT_EQ(got.at("results").size(), want.at("results").size());
  for (size_t i = 0; i < got.at("results").size(); ++i) {
    const nlohmann::json& a = got.at("results")[i];
    const nlohmann::json& b = want.at("results")[i];
    EXPECT_EQ(a.at("ctx"), b.at("ctx"));
    EXPECT_EQ(a.at("method"), b.at("method"));
    EXPECT_EQ(a.at("ppl").get<double>(), b.at("ppl").get<double>()) << "row " << i;  // bit for bit
    EXPECT_EQ(a.at("unit_nll"), b.at("unit_nll"));
    EXPECT_EQ(a.at("buckets"), b.at("buckets"));
    if (b.contains("diff_nll_mean")) {
      EXPECT_EQ(a.at("diff_nll_mean"), b.at("diff_nll_mean"));
    }
  }
}

TEST(EvalStreamTest, InterruptedKilledAndResumedRunsEqualAnUninterruptedOne) {
  const std::string full = Temp("full.json"), sigint = Temp("int.json"), killed = Temp("kill.json");
  const std::string err = Temp("err.txt");
  const testing::CliResult r = testing::RunPosenc(kArgs + " --json " + full, "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json want = nlohmann::json::parse(Slurp(full));
  EXPECT_EQ(want.at("complete"), true);
  ASSERT_EQ(want.at("results").size(), 12u);

  // Ctrl-C: exit status 130, the finished rows kept and named.
  const std::string out = RunAndSignal(sigint, err, "INT");
  EXPECT_NE(out.find("status=130"), std::string::npos) << out;
  EXPECT_NE(Slurp(err).find("rows kept in " + sigint), std::string::npos) << Slurp(err);
  const nlohmann::json partial = nlohmann::json::parse(Slurp(sigint));
  EXPECT_EQ(partial.at("complete"), false);
  EXPECT_GE(partial.at("results").size(), 1u);
  EXPECT_LT(partial.at("results").size(), 12u) << "the run finished before the signal: make it longer";

  // SIGKILL: no handler runs; the file is whatever the last atomic rewrite left, a readable JSON.
  RunAndSignal(killed, err, "KILL");
  const nlohmann::json after_kill = nlohmann::json::parse(Slurp(killed));
  EXPECT_EQ(after_kill.at("complete"), false);
  EXPECT_GE(after_kill.at("results").size(), 1u);

  for (const std::string& path : {sigint, killed}) {
    const testing::CliResult resumed = testing::RunPosenc(kArgs + " --resume " + path, "2>&1");
    ASSERT_EQ(resumed.status, 0) << resumed.out;
    const nlohmann::json got = nlohmann::json::parse(Slurp(path));
    EXPECT_EQ(got.at("complete"), true);
    ExpectSameRows(got, want);
  }
  // A file of another run is refused, naming the key.
  const testing::CliResult other =
      testing::RunPosenc("eval --ctx 512 --methods none --tokens 1024 --resume " + full, "2>&1");
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.out.find("its tokens is 2048, this run's is 1024"), std::string::npos) << other.out;
  for (const std::string& p : {full, sigint, killed, err}) std::remove(p.c_str());
}

}  // namespace
}  // namespace posenc
