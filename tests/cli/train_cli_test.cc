// `posenc finetune` and `posenc train` through the built CLI: a few steps on the bundled model whose checkpoint
// `posenc eval` then reads, and bad input refused with the flag and the value.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test_util.h"

namespace posenc {
namespace {

using testing::CliResult;
using testing::RunPosenc;

const std::string kSample = std::string(POSENC_DATA_DIR) + "/text/tinystories_sample_cs336.txt";

std::string TempDir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() / ("posenc_train_cli_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

TEST(TrainCliTest, FinetuneWritesACheckpointThatEvalReads) {
  const std::string dir = TempDir("finetune");
  const CliResult r = RunPosenc("finetune --method linear --factor 2 --ctx 32 --steps 2 --batch 1 --text " + kSample +
                                " --eval-ctx 32 --eval-at 0,2 --out " + dir + "/ft.bin");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("documents 1-4 of 6 train (the first 80%), 5-6 are held out"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("RoPE method: linear (factor 2, L0 512)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| step | L=32 |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\r"), std::string::npos) << "no progress line when stderr is not a terminal";
  const CliResult e = RunPosenc("eval --model " + dir + "/ft.bin --text " + kSample +
                                " --ctx 32 --methods linear --factor 2 --tokens 64");
  ASSERT_EQ(e.status, 0) << e.out;
  EXPECT_NE(e.out.find("linear"), std::string::npos) << e.out;
  std::filesystem::remove_all(dir);
}

TEST(TrainCliTest, BadInputIsAClearError) {
  const std::string dir = TempDir("errors");
  CliResult r = RunPosenc("finetune --method linear --ctx 32 --steps 0 --text " + kSample + " --out " + dir + "/x.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("--steps must be >= 1, got 0"), std::string::npos) << r.out;
  r = RunPosenc("finetune --method sideways --ctx 32 --steps 1 --out " + dir + "/x.bin");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("unknown method 'sideways'"), std::string::npos) << r.out;
  {
    std::ofstream(dir + "/bad.json") << R"({"dim": 64, "hidden_dim": 172, "n_layers": 1, "n_heads": 8,
      "n_kv_heads": 4, "vocab_size": 512, "max_seq_len": 256, "position_encodng": "rope"})";
  }
  r = RunPosenc("train --config " + dir + "/bad.json --ctx 32 --steps 1 --out " + dir + "/x.gguf");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("position_encodng"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace posenc
