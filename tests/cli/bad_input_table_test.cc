// Bad input found by attacking the training, output and resource surfaces as a new user would, kept as one table
// (arguments, environment, expected status, message fragment): every row must end with that status and message
// before any work, and leave every file that existed before the run byte for byte as it was. A change that brings
// one back fails here. Then the signals: a training run stopped by Ctrl-C or SIGTERM saves its state and exits
// 130 or 143, as a shell reports a process ended by that signal.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "test_util.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::RunPosenc;

const std::string kData = POSENC_DATA_DIR;
const std::string kSample = kData + "/text/tinystories_sample_cs336.txt";

std::string Slurp(const fs::path& p) { return testing::FileBytes(p.string()); }

std::map<std::string, std::string> Snapshot(const fs::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) files[e.path().filename().string()] = Slurp(e.path());
  }
  return files;
}

class BadInputTableTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("posenc_bad_input_table_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::copy_file(kData + "/stories260K.bin", dir_ / "m.bin");
    fs::copy_file(kSample, dir_ / "text.txt");
    fs::copy_file(std::string(POSENC_SOURCE_DIR) + "/examples/configs/train/stories260K_rope.json", dir_ / "m.json");
    std::ofstream(dir_ / "empty.txt") << "\n";
    // A state to resume: one step of a linear fine-tune, and a copy with one bit flipped in its tensors.
    const CliResult r = RunPosenc(Finetune() + " --steps 1 --out " + (dir_ / "ft.bin").string());
    ASSERT_EQ(r.status, 0) << r.out;
    std::string state = Slurp(dir_ / "ft.bin.state");
    state[state.size() / 2] = static_cast<char>(state[state.size() / 2] ^ 0x01);
    std::ofstream(dir_ / "flipped.state", std::ios::binary) << state;
    fs::remove(dir_ / "ft.bin");
    fs::remove(dir_ / "ft.bin.json");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string Finetune(const std::string& method = "linear") {
    return "finetune --method " + method + " --factor 2 --ctx 8 --batch 1 --eval-ctx 8 --eval-tokens 8 --quiet --model " +
           (dir_ / "m.bin").string() + " --text " + (dir_ / "text.txt").string();
  }
  static std::string P(const std::string& name) { return (dir_ / name).string(); }

  static fs::path dir_;
};

fs::path BadInputTableTest::dir_;

struct BadInput {
  std::string what;      // the case in words
  std::string args;      // after `posenc`
  std::string env;       // before it ("OMP_NUM_THREADS=100000")
  int status;            // expected exit status
  std::string fragment;  // the message must contain it
};

TEST_F(BadInputTableTest, EveryCaseIsAClearErrorAndChangesNoFile) {
  const std::string eval = "eval --ctx 32 --tokens 64 --methods none --threads 1 --text " + P("text.txt");
  const std::vector<BadInput> cases = {
      {"an empty --json path", eval + " --json ''", "", 1, "--json: the output path is empty"},
      {"--json and --csv naming one file", eval + " --json " + P("r") + " --csv " + P("./r"), "", 1,
       "are the same file"},
      {"eval --json over the model", eval + " --model " + P("m.bin") + " --json " + P("m.bin"), "", 1,
       "--json " + P("m.bin") + " is the same file as --model"},
      {"eval --csv over the text", eval + " --csv " + P("text.txt"), "", 1, "is the same file as --text"},
      {"train's report <out>.json over its --config", "train --ctx 8 --steps 1 --quiet --tokenizer " + kData +
       "/tok512.bin --text " + P("text.txt") + " --config " + P("m.json") + " --out " + P("m"), "", 1,
       "--out (its .json report) " + P("m.json") + " is the same file as --config"},
      {"finetune --out over the state it resumes", Finetune() + " --steps 2 --resume " + P("ft.bin.state") +
       " --out " + P("ft.bin.state"), "", 1, "is the same file as --resume"},
      {"finetune --out over its --text", Finetune() + " --steps 1 --out " + P("text.txt"), "", 1,
       "--out " + P("text.txt") + " is the same file as --text"},
      {"an empty --holdout file", Finetune() + " --steps 1 --holdout " + P("empty.txt") + " --out " + P("x.bin"), "",
       1, "--holdout " + P("empty.txt") + " holds no text"},
      {"a negative --warmup", Finetune() + " --steps 1 --warmup -5 --out " + P("x.bin"), "", 1,
       "--warmup must be >= 0, got -5"},
      {"resume with another --lr", Finetune() + " --steps 2 --lr 0.5 --resume " + P("ft.bin.state") + " --out " +
       P("x.bin"), "", 1, "was trained with --lr 0.0001; this run asks for --lr 0.5"},
      {"resume with another --method", Finetune("ntk") + " --steps 2 --resume " + P("ft.bin.state") +
       " --out " + P("x.bin"), "", 1, "was trained with --method linear; this run asks for --method ntk"},
      {"resume a state with a flipped bit", Finetune() + " --steps 2 --resume " + P("flipped.state") + " --out " +
       P("x.bin"), "", 1, "--resume " + P("flipped.state") + " is damaged"},
      {"OMP_NUM_THREADS past any machine", eval, "OMP_NUM_THREADS=100000", 1,
       "OMP_NUM_THREADS=100000 asks for 100000 OpenMP threads; posenc runs at most 1024"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.what + ": posenc " + c.args);
    const auto before = Snapshot(dir_);
    const CliResult r = RunPosenc(c.args, "2>&1", c.env);
    EXPECT_EQ(r.status, c.status) << r.out;
    EXPECT_NE(r.out.find(c.fragment), std::string::npos) << r.out;
    EXPECT_EQ(Snapshot(dir_), before) << "a file changed, appeared or went";
  }
}

// Ctrl-C (SIGINT) or SIGTERM during finetune: the run stops after the current step, saves checkpoint and state,
// says so, and exits 128 + the signal's number; the state resumes.
TEST_F(BadInputTableTest, InterruptedTrainingSavesTheStateAndExitsWithTheSignal) {
  for (const auto& [signal, status] : {std::pair{"INT", 130}, std::pair{"TERM", 143}}) {
    const std::string out = P(std::string("sig") + signal + ".bin");
    // Started in the background of a shell and signalled once it is in its step loop (the model loads in well
    // under the 2 s wait); a hang is bounded by timeout.
    const std::string script = P(std::string("sig") + signal + ".sh");
    std::ofstream(script) << "'" << POSENC_CLI_PATH << "' " << Finetune() << " --steps 100000 --out " << out << " > "
                          << out << ".log 2>&1 &\npid=$!\nsleep 2\nkill -" << signal << " $pid\nwait $pid\n"
                          << "echo status=$?\n";
    FILE* pipe = popen(("timeout 120 bash " + script).c_str(), "r");
    ASSERT_NE(pipe, nullptr);
    std::string text;
    char buf[256];
    while (fgets(buf, sizeof buf, pipe) != nullptr) text += buf;
    pclose(pipe);
    const std::string log = Slurp(out + ".log");
    EXPECT_NE(text.find("status=" + std::to_string(status)), std::string::npos) << text << log;
    EXPECT_NE(log.find("interrupted after step"), std::string::npos) << log;
    EXPECT_TRUE(fs::exists(out + ".state"));
    EXPECT_TRUE(fs::exists(out));
  }
}

}  // namespace
}  // namespace posenc
