// No output of a posenc subcommand replaces one of its inputs or another of its outputs: every pair of path flags of
// every subcommand that writes files (eval, bench, demo, train, finetune; inspect, generate and tokenize write only
// to standard output) is tried through the built CLI, the output spelled differently from the input (`dir/./name`)
// or reached as a derived name (`<out>.json`, `<out>.state`, `<stem>.step<N><ext>`, a plot directory's PNG). Each
// run must end with status 1 and a message naming both flags before any work, the input byte for byte as it was.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "posenc/report/gnuplot.h"
#include "test_util.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using testing::CliResult;
using testing::RunPosenc;

const std::string kData = POSENC_DATA_DIR;
const std::string kSample = kData + "/text/tinystories_sample_cs336.txt";

std::string Slurp(const fs::path& p) { return testing::FileBytes(p.string()); }

fs::path FreshDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("posenc_run_paths_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// One input flag of a subcommand and the file it is given (copied into the case's directory).
struct InputFlag {
  std::string flag;
  std::string source;  // file copied as the input
};

// One output of a subcommand: its flag as the message names it, and how to make it land on `target` (a path
// whose file name is `target_name`, derived outputs need a fitting name).
struct OutputFlag {
  std::string message_flag;  // as the error names it
  std::string target_name;   // file name the output lands on
  std::function<std::string(const fs::path& target)> args;  // flags that write to target
};

struct Subcommand {
  std::string name;
  std::string base;  // flags that make a cheap run (should the check be missing)
  std::vector<InputFlag> inputs;
  std::vector<OutputFlag> outputs;
};

std::string Dotted(const fs::path& p) { return (p.parent_path() / "." / p.filename()).string(); }

std::string Strip(const fs::path& target, const std::string& suffix) {
  const std::string s = Dotted(target);
  return s.substr(0, s.size() - suffix.size());
}

std::vector<OutputFlag> TrainOutputs() {
  return {
      {"--out", "case.gguf", [](const fs::path& t) { return "--out " + Dotted(t); }},
      {"--out (its .json report)", "case.gguf.json", [](const fs::path& t) { return "--out " + Strip(t, ".json"); }},
      {"--out (its .state file)", "case.gguf.state", [](const fs::path& t) { return "--out " + Strip(t, ".state"); }},
      {"--out (its checkpoint after step 1)", "case.step1.gguf",
       [](const fs::path& t) { return "--eval-at 1,2 --out " + (t.parent_path() / "." / "case.gguf").string(); }},
  };
}

std::vector<Subcommand> Subcommands() {
  const std::string model = kData + "/stories260K.bin";
  const std::string tok = kData + "/tok512.bin";
  const std::string train_config = std::string(POSENC_SOURCE_DIR) + "/examples/configs/train/stories260K_rope.json";
  const std::string llama3 = std::string(POSENC_SOURCE_DIR) + "/examples/configs/llama3.1-8b.json";
  std::vector<Subcommand> s;
  s.push_back({"eval",
               "eval --ctx 32 --tokens 64 --methods llama3 --threads 1",
               {{"--model", model}, {"--text", kSample}, {"--tokenizer", tok}, {"--config", llama3}},
               {{"--json", "case.json", [](const fs::path& t) { return "--json " + Dotted(t); }},
                {"--csv", "case.csv", [](const fs::path& t) { return "--csv " + Dotted(t); }},
                {"--plot", "case.png", [](const fs::path& t) { return "--plot " + Dotted(t); }}}});
  if (POSENC_HAVE_BENCH) s.push_back({"bench",
               "bench --no-torch --filter sinusoidal_add --reps 1 --quiet",
               {{"--torch-script", std::string(POSENC_SOURCE_DIR) + "/bench/torch_rope_baseline.py"}},
               {{"--json", "case.json", [](const fs::path& t) { return "--json " + Dotted(t); }}}});
  if (GnuplotPath()) {  // without gnuplot the demo writes no plot at all
    s.push_back({"demo",
                 "demo rope",
                 {{"--model", model}, {"--tokenizer", tok}, {"--text", kSample}},
                 {{"--plot-dir", "rope_decay.png",
                   [](const fs::path& t) { return "--plot-dir " + (t.parent_path() / ".").string(); }}}});
  }
  s.push_back({"finetune",
               "finetune --method linear --ctx 8 --steps 2 --batch 1 --eval-ctx 8 --eval-tokens 8 --quiet",
               {{"--model", model}, {"--text", kSample}, {"--holdout", kSample}, {"--tokenizer", tok},
                {"--resume", kSample}},
               TrainOutputs()});
  s.push_back({"train",
               "train --ctx 8 --steps 2 --batch 1 --eval-ctx 8 --eval-tokens 8 --quiet",
               {{"--config", train_config}, {"--text", kSample}, {"--holdout", kSample}, {"--tokenizer", tok},
                {"--resume", kSample}},
               TrainOutputs()});
  return s;
}

// Every input flag against every output: the output lands on the input's file.
TEST(RunPathsTest, NoOutputReplacesAnInput) {
  int cases = 0;
  for (const Subcommand& sub : Subcommands()) {
    for (const InputFlag& victim : sub.inputs) {
      for (const OutputFlag& out : sub.outputs) {
        // The one pair allowed on purpose: a run continues its own state in place.
        if (victim.flag == "--resume" && out.message_flag == "--out (its .state file)") continue;
        const fs::path dir = FreshDir(sub.name + std::to_string(cases));
        std::string args = sub.base;
        fs::path victim_path;
        for (size_t i = 0; i < sub.inputs.size(); ++i) {
          const InputFlag& in = sub.inputs[i];
          const fs::path p = &in == &victim ? dir / out.target_name : dir / ("input" + std::to_string(i));
          fs::copy_file(in.source, p);
          args += " " + in.flag + " " + p.string();
          if (&in == &victim) victim_path = p;
        }
        args += " " + out.args(victim_path);
        const std::string before = Slurp(victim_path);
        const CliResult r = RunPosenc(args);
        SCOPED_TRACE(args);
        EXPECT_EQ(r.status, 1) << r.out;
        EXPECT_NE(r.out.find(out.message_flag + " "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("is the same file as " + victim.flag + " " + victim_path.string()), std::string::npos)
            << r.out;
        EXPECT_EQ(Slurp(victim_path), before) << "the input was changed";
        ++cases;
        fs::remove_all(dir);
      }
    }
  }
  EXPECT_GE(cases, 40);
}

// Two outputs of one run that name the same file (spelled differently): refused, nothing written.
TEST(RunPathsTest, TwoOutputsNeverNameTheSameFile) {
  const std::vector<std::string> flags = {"--json", "--csv", "--plot"};
  for (size_t a = 0; a < flags.size(); ++a) {
    for (size_t b = a + 1; b < flags.size(); ++b) {
      const fs::path dir = FreshDir("pair" + std::to_string(a) + std::to_string(b));
      const std::string args = "eval --ctx 32 --tokens 64 --methods none --threads 1 --text " + kSample + " " +
                               flags[a] + " " + (dir / "same").string() + " " + flags[b] + " " + Dotted(dir / "same");
      const CliResult r = RunPosenc(args);
      SCOPED_TRACE(args);
      EXPECT_EQ(r.status, 1) << r.out;
      EXPECT_NE(r.out.find(flags[a] + " " + (dir / "same").string() + " and " + flags[b]), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("are the same file"), std::string::npos) << r.out;
      EXPECT_FALSE(fs::exists(dir / "same"));
      fs::remove_all(dir);
    }
  }
}

// An empty output path is refused before any work, for every output flag.
TEST(RunPathsTest, EmptyOutputPathsAreRefused) {
  for (const std::string& args :
       {std::string("eval --ctx 32 --tokens 64 --methods none --json ''"), std::string("eval --csv ''"),
        std::string("eval --plot ''"),
        std::string(POSENC_HAVE_BENCH ? "bench --no-torch --filter sinusoidal_add --json ''" : "eval --json ''"),
        std::string("demo rope --plot-dir ''")}) {
    const CliResult r = RunPosenc(args);
    SCOPED_TRACE(args);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("the output path is empty"), std::string::npos) << r.out;
  }
}

// A finetune run resumed in place (`--resume x.state --out x`, <out>.state being the state resumed) is the one
// input an output may replace: it goes on, and then the state holds the later step.
TEST(RunPathsTest, AResumedRunContinuesItsOwnState) {
  const fs::path dir = FreshDir("resume");
  const std::string base = "finetune --method linear --ctx 8 --batch 1 --eval-ctx 8 --eval-tokens 8 --quiet --text " +
                           kSample + " --out " + (dir / "ft.gguf").string();
  CliResult r = RunPosenc(base + " --steps 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string first = Slurp(dir / "ft.gguf.state");
  r = RunPosenc(base + " --steps 2 --resume " + Dotted(dir / "ft.gguf.state"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(Slurp(dir / "ft.gguf.state"), first);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace posenc
