// The first things a newcomer types: --version, --help with examples, and the errors and output they meet first.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "test_util.h"

namespace posenc {
namespace {

using testing::CliResult;
using testing::RunPosenc;

TEST(HelpVersionTest, VersionNamesTheVersionCommitKernelsAndBlas) {
  const CliResult r = RunPosenc("--version", "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(std::regex_search(r.out, std::regex(R"(^posenc [0-9]+\.[0-9]+\.[0-9]+ \(commit ([0-9a-f]{12}(-dirty)?|unknown)\)\n)")))
      << r.out;
  // The dispatched Highway target is one of the usable ones, and every usable one was compiled.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(kernels: (\S+) on this CPU \(compiled for: ([^;]+); usable here: ([^)]+)\))")))
      << r.out;
  const std::string dispatched = m[1], compiled = " " + m[2].str() + " ", usable = " " + m[3].str() + " ";
  EXPECT_NE(usable.find(" " + dispatched + " "), std::string::npos) << r.out;
  std::istringstream words(m[3].str());
  for (std::string w; words >> w;) EXPECT_NE(compiled.find(" " + w + " "), std::string::npos) << w;
  EXPECT_NE(r.out.find("\nBLAS: OpenBLAS"), std::string::npos) << r.out;
}

// Every subcommand's --help ends with an "Examples:" block of 2 or 3 lines that each start with `posenc <command>`
// (or mpirun / a pipe into it).
TEST(HelpVersionTest, EveryHelpEndsWithExamples) {
  for (const std::string command : {"", "eval", "inspect", "generate", "bench", "demo", "tokenize", "finetune",
                                    "train"}) {
    SCOPED_TRACE(command.empty() ? "posenc --help" : "posenc " + command + " --help");
    if (command == "bench" && !POSENC_HAVE_BENCH) continue;  // posenc-bench not built: BenchCli says so
    const CliResult r = RunPosenc(command + " --help", "2>&1");
    ASSERT_EQ(r.status, 0) << r.out;
    const size_t at = r.out.rfind("\nExamples:\n");
    ASSERT_NE(at, std::string::npos) << r.out;
    std::istringstream lines(r.out.substr(at + 11));
    int examples = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.empty()) continue;
      ++examples;
      EXPECT_NE(line.find("posenc " + command), std::string::npos) << line;
    }
    EXPECT_GE(examples, command.empty() ? 3 : 2);
    EXPECT_LE(examples, 3);
  }
}

TEST(HelpVersionTest, FinetuneHelpNamesHuggingFaceFolders) {
  const CliResult r = RunPosenc("finetune --help", "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("Hugging Face"), std::string::npos) << r.out;
}

TEST(HelpVersionTest, MissingTokenizerErrorNamesTheFlag) {
  const CliResult r = RunPosenc("tokenize --model '" + std::string(POSENC_DATA_DIR) + "/stories260K.bin'",
                                "2>&1 < /dev/null");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("holds no vocabulary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--tokenizer"), std::string::npos) << r.out;
}

TEST(HelpVersionTest, GenerateOutputEndsWithANewline) {
  const CliResult r = RunPosenc("generate -n 12 -t 0", "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_GT(r.out.size(), 1u);
  EXPECT_EQ(r.out.back(), '\n');
  EXPECT_NE(r.out[r.out.size() - 2], '\n') << "one final newline, not an empty line: " << r.out;
}

}  // namespace
}  // namespace posenc
