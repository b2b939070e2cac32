// The `posenc passkey` command line: the table and JSON of a small run, bad input named, the inputs never
// replaced, the training text, and the heat-map.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "model/model_test_util.h"
#include "posenc/report/gnuplot.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::CliResult;

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("posenc_passkey_cli_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

// A small run's command line (CLI11 refuses a repeated option: each flag is given once).
std::string Small(const std::string& depths = "0,1", const std::string& methods = "none,self-extend",
                  const std::string& trials = "2", const std::string& lengths = "200,300") {
  return "passkey --model " + testing::ModelPath() + " --lengths " + lengths + " --depths " + depths + " --trials " +
         trials + " --methods " + methods + " --max-new-tokens 3";
}

TEST(PasskeyCliTest, TableAndJsonOfASmallRun) {
  const std::string json = Temp("run.json");
  const CliResult r = testing::RunPosenc(Small() + " --json " + json, "2>/dev/null");
  ASSERT_EQ(r.status, 0) << r.out;
  // Header, rule, one line per (length, method).
  EXPECT_NE(r.out.find("| length | method | factor | depth 0 | depth 1 | accuracy |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| 300 | self-extend | 1 | "), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(testing::FileBytes(json));
  EXPECT_TRUE(j["complete"].get<bool>());
  EXPECT_EQ(j["rows"].size(), 8u);
  EXPECT_EQ(j["lengths"], nlohmann::json({200, 300}));
  EXPECT_EQ(j["max_new_tokens"], 3);
  std::filesystem::remove(json);
}

TEST(PasskeyCliTest, BadInputIsNamed) {
  const auto fails = [](const std::string& args, const std::vector<std::string>& parts) {
    const CliResult r = testing::RunPosenc(args, "2>&1");
    EXPECT_EQ(r.status, 1) << r.out;
    for (const std::string& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "'" << p << "' in: " << r.out;
  };
  fails(Small("0.5,2"), {"depths", "2"});
  fails(Small("0,1", "none,bogus"), {"unknown method", "bogus"});
  fails(Small("0,1", "none", "0"), {"trials", "0"});
  fails(Small("0,1", "none", "2", "50"), {"length (--lengths) 50", "without filler"});
  // An output that is an input is refused before any work.
  fails(Small() + " --json " + testing::ModelPath(), {"--json", "--model"});
}

TEST(PasskeyCliTest, WritesTrainingText) {
  const std::string text = Temp("train.txt");
  const CliResult r = testing::RunPosenc("passkey --model " + testing::ModelPath() + " --write-training-text " + text +
                                             " --documents 5 --max-tokens 240 --seed 3",
                                         "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("5 documents of up to 240 tokens"), std::string::npos) << r.out;
  const std::string body = testing::FileBytes(text);
  size_t docs = 1;
  for (size_t at = 0; (at = body.find("\n<|endoftext|>\n", at)) != std::string::npos; ++at) ++docs;
  EXPECT_EQ(docs, 5u);
  EXPECT_NE(body.find("What is the pass key? The pass key is "), std::string::npos);
  std::filesystem::remove(text);
}

TEST(PasskeyCliTest, HeatMapIsAPng) {
  if (!GnuplotPath()) GTEST_SKIP() << "gnuplot is not installed";
  const std::string png = Temp("map.png");
  const CliResult r = testing::RunPosenc(Small() + " --plot " + png, "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(testing::FileBytes(png).substr(1, 3), "PNG");
  std::filesystem::remove(png);
}

}  // namespace
}  // namespace posenc
