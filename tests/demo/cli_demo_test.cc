// `posenc demo` end to end through the built CLI, and docs/guide.md against what the commands really print.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/report/gnuplot.h"
#include "test_util.h"

namespace {

using CliRun = posenc::testing::CliResult;

// Runs `sh -c "cd <dir> && <env> <cli> <args>"`; stderr goes to /dev/null unless merged by the caller.
CliRun RunCli(const std::string& args, const std::string& dir = ".", const std::string& env = "") {
  return posenc::testing::RunPosenc(args, "", env, dir);
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) lines.push_back(line);
  return lines;
}

// Values at float32-rounding level (|x| < 1e-5 in e-notation, e.g. 8.94e-08) depend on summation order in
// kernels others may tune; they are compared as a placeholder. Exact zeros (0.00e+00) are kept.
std::string MaskRounding(const std::string& line) {
  static const std::regex tiny(R"([-+]?\d\.\d+e-(0[6-9]|[1-9]\d))");
  return std::regex_replace(line, tiny, "<rounding>");
}

// expected may contain a line "[...]" that matches any run of lines (possibly empty).
bool MatchLines(const std::vector<std::string>& want, size_t wi, const std::vector<std::string>& got, size_t gi,
                std::string& why) {
  while (wi < want.size()) {
    if (want[wi] == "[...]") {
      for (size_t g = gi; g <= got.size(); ++g) {
        if (MatchLines(want, wi + 1, got, g, why)) return true;
      }
      return false;
    }
    if (gi >= got.size()) {
      why = "output ended; guide expects: " + want[wi];
      return false;
    }
    if (MaskRounding(want[wi]) != MaskRounding(got[gi])) {
      why = "guide:  " + want[wi] + "\noutput: " + got[gi];
      return false;
    }
    ++wi;
    ++gi;
  }
  if (gi != got.size()) {
    why = "output has more lines than the guide, from: " + got[gi];
    return false;
  }
  return true;
}

TEST(DemoCli, EachTopicRunsAndPrintsItsHeading) {
  const std::vector<std::pair<std::string, std::string>> topics = {{"sinusoidal", "== sinusoidal:"},
                                                                   {"learned", "== learned:"},
                                                                   {"rope", "== rope:"},
                                                                   {"extension", "== extension:"},
                                                                   {"position-blind", "== position-blind:"}};
  for (const auto& [topic, heading] : topics) {
    const CliRun r = RunCli("demo " + topic);
    EXPECT_EQ(r.status, 0) << topic;
    EXPECT_EQ(r.out.rfind(heading, 0), 0u) << topic << ":\n" << r.out;
  }
}

TEST(DemoCli, UnknownTopicIsAnErrorNamingTheChoices) {
  const CliRun r = RunCli("demo nonsense 2>&1");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("position-blind"), std::string::npos) << r.out;
}

TEST(DemoCli, MissingGnuplotIsANoteNotAFailure) {
  char tmpl[] = "/tmp/posenc_demo_cli_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const CliRun r = RunCli("demo sinusoidal --plot-dir plots 2>&1", dir, "PATH=" + dir);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("note: gnuplot was not found on PATH"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("plot written"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(DemoCli, PlotDirWritesAndNamesThePngs) {
  if (!posenc::GnuplotPath()) GTEST_SKIP() << posenc::GnuplotMissingMessage();
  char tmpl[] = "/tmp/posenc_demo_cli_XXXXXX";
  const std::string dir = mkdtemp(tmpl);
  const CliRun r = RunCli("demo extension --plot-dir out/plots", dir);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("plot written: out/plots/extension_wavelengths.png"), std::string::npos) << r.out;
  EXPECT_TRUE(std::filesystem::is_regular_file(dir + "/out/plots/extension_wavelengths.png"));
  std::filesystem::remove_all(dir);
}

// Every ```text block of docs/guide.md that starts with "$ posenc demo ..." is the real output of that
// command (run from a fresh temporary directory, so --plot-dir paths are relative to it).
TEST(DemoGuide, EveryCommandBlockMatchesTheRealOutput) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/docs/guide.md");
  ASSERT_TRUE(in) << "docs/guide.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::vector<std::string> lines = Lines(ss.str());
  int blocks = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```text" || i + 1 >= lines.size() || lines[i + 1].rfind("$ posenc demo", 0) != 0) continue;
    const std::string command = lines[i + 1].substr(std::string("$ posenc ").size());
    std::vector<std::string> want;
    size_t j = i + 2;
    for (; j < lines.size() && lines[j] != "```"; ++j) want.push_back(lines[j]);
    i = j;
    if (command.find("--plot-dir") != std::string::npos && !posenc::GnuplotPath()) continue;
    char tmpl[] = "/tmp/posenc_demo_guide_XXXXXX";
    const std::string dir = mkdtemp(tmpl);
    const CliRun r = RunCli(command, dir);
    std::filesystem::remove_all(dir);
    EXPECT_EQ(r.status, 0) << command;
    std::string why;
    EXPECT_TRUE(MatchLines(want, 0, Lines(r.out), 0, why)) << "$ posenc " << command << "\n" << why;
    ++blocks;
  }
  EXPECT_GE(blocks, 6) << "the guide shows every topic's command and output";
}

}  // namespace
