// `posenc demo` end to end through the built CLI, and docs/guide.md against what the commands really print.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
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

// A printed decimal number ("24.6878", "-0.5", "1.2e+03") and the value of one unit in its last printed digit.
struct Printed {
  double value;
  double unit;
};

std::vector<std::string> SplitNumbers(const std::string& line, std::vector<Printed>& numbers) {
  static const std::regex number(R"([-+]?\d+\.(\d+)(e[-+]\d+)?)");
  std::vector<std::string> rest;
  size_t at = 0;
  for (auto it = std::sregex_iterator(line.begin(), line.end(), number); it != std::sregex_iterator(); ++it) {
    rest.push_back(line.substr(at, static_cast<size_t>(it->position()) - at));
    const int decimals = static_cast<int>((*it)[1].length());
    const int exponent = (*it)[2].matched ? std::stoi((*it)[2].str().substr(1)) : 0;
    numbers.push_back({std::stod(it->str()), std::pow(10.0, exponent - decimals)});
    at = static_cast<size_t>(it->position() + it->length());
  }
  rest.push_back(line.substr(at));
  return rest;
}

// The same line up to the rounding of its printed numbers. A value computed on another CPU (another BLAS kernel,
// another summation order) differs from the guide's by float32 rounding, far below the printed precision, but
// when it sits next to a rounding boundary the last printed digit flips: each number may differ by one unit in
// its last printed place, the text around the numbers must be identical.
bool SameUpToPrintedRounding(const std::string& want, const std::string& got) {
  std::vector<Printed> want_numbers, got_numbers;
  const std::vector<std::string> want_text = SplitNumbers(want, want_numbers);
  const std::vector<std::string> got_text = SplitNumbers(got, got_numbers);
  if (want_text.size() != got_text.size()) return false;
  for (size_t i = 0; i < want_text.size(); ++i) {
    // Column padding may shift by a character when a digit flips (9.9999 -> 10.0000): compare trimmed text.
    auto trim = [](const std::string& s) {
      const size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
      return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    if (trim(want_text[i]) != trim(got_text[i])) return false;
  }
  for (size_t i = 0; i < want_numbers.size(); ++i) {
    if (want_numbers[i].unit != got_numbers[i].unit) return false;
    if (std::abs(want_numbers[i].value - got_numbers[i].value) > 1.5 * want_numbers[i].unit) return false;
  }
  return true;
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
    if (MaskRounding(want[wi]) != MaskRounding(got[gi]) &&
        !SameUpToPrintedRounding(MaskRounding(want[wi]), MaskRounding(got[gi]))) {
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

// position-blind runs on any model file: a GGUF (it used to fail inside the llama2.c reader with "n_heads must
// be > 0") is named and gives the verdicts.
TEST(DemoCli, PositionBlindRunsOnTheGivenModel) {
  const std::string gguf = std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-F32.gguf";
  const CliRun r = RunCli("demo position-blind --model '" + gguf + "' 2>&1");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Layer 0 of stories260K-F32.gguf (llama: dim 64"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("permuted"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("n_heads"), std::string::npos) << r.out;
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
