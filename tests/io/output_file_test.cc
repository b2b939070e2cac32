// Output files: checked before the work (missing directory, a directory or device in the way), written
// atomically (temp file + rename: complete content, no temporary left behind, the old file intact on failure,
// an existing file's mode kept).
#include "posenc/io/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("posenc_output_test_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string Slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(OutputFileTest, CheckRefusesWhatCannotBeWritten) {
  ExpectThrowWith<IoError>([] { CheckOutputPath("/nonexistent/x.json", "--json"); },
                           {"--json", "/nonexistent/x.json", "directory '/nonexistent' does not exist"});
  const fs::path d = TempDir("check");
  ExpectThrowWith<IoError>([&] { CheckOutputPath(d.string(), "--csv"); },
                           {"--csv", "is not a regular file", "a directory"});
  ExpectThrowWith<IoError>([] { CheckOutputPath("/dev/null", "--plot"); },
                           {"--plot", "/dev/null", "not a regular file"});
  ExpectThrowWith<IoError>([] { CheckOutputPath("", "--json"); }, {"--json", "empty"});
  const fs::path file = d / "f";
  std::ofstream(file) << "x";
  ExpectThrowWith<IoError>([&] { CheckOutputPath((file / "y.json").string(), "--json"); }, {"is not a directory"});
  EXPECT_NO_THROW(CheckOutputPath((d / "new.json").string(), "--json"));
  EXPECT_FALSE(fs::exists(d / "new.json"));  // the check leaves nothing behind
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

TEST(OutputFileTest, AtomicWriteReplacesCompletelyAndKeepsTheMode) {
  const fs::path d = TempDir("write");
  const fs::path p = d / "out.json";
  WriteFileAtomically(p.string(), "first");
  EXPECT_EQ(Slurp(p), "first");
  ::chmod(p.c_str(), 0640);
  const std::string big(3 << 20, 'z');
  WriteFileAtomically(p.string(), big);
  EXPECT_EQ(Slurp(p), big);
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);  // no temporary left
  fs::remove_all(d);
}

TEST(OutputFileTest, FailedWriteLeavesTheOldFile) {
  const fs::path d = TempDir("fail");
  const fs::path p = d / "sub";
  fs::create_directory(p);  // a directory where the file should go: refused, directory untouched
  ExpectThrowWith<IoError>([&] { WriteFileAtomically(p.string(), "data"); }, {"not a regular file"});
  EXPECT_TRUE(fs::is_directory(p));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

// Several outputs of one run: all written, or (a later one failing) none, and no temporary left behind.
TEST(OutputFileTest, FilesWrittenTogetherAreAllOrNone) {
  const fs::path d = TempDir("together");
  std::vector<std::pair<std::string, std::string>> files = {{(d / "a.json").string(), "{}\n"},
                                                            {(d / "b.csv").string(), "x,y\n"}};
  WriteFilesAtomically(files);
  EXPECT_EQ(Slurp(d / "a.json"), "{}\n");
  EXPECT_EQ(Slurp(d / "b.csv"), "x,y\n");
  files[0].second = "{\"new\": 1}\n";
  files[1].first = (d / "missing" / "b.csv").string();
  ExpectThrowWith<IoError>([&] { WriteFilesAtomically(files); }, {"missing"});
  EXPECT_EQ(Slurp(d / "a.json"), "{}\n");  // the first file kept its old content
  int entries = 0;
  for (const auto& e : fs::directory_iterator(d)) entries += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(entries, 2);  // a.json and b.csv: no temporary left
  fs::remove_all(d);
}

TEST(OutputFileTest, AtomicOutputFileCommitsOrCleansUp) {
  const fs::path d = TempDir("handle");
  const fs::path p = d / "plot.png";
  std::ofstream(p) << "old";
  {
    AtomicOutputFile out(p.string());
    std::ofstream(out.temp_path()) << "new";
    EXPECT_EQ(Slurp(p), "old");  // nothing visible before Commit
  }
  EXPECT_EQ(Slurp(p), "old");  // abandoned: the old file stands, the temporary is gone
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  {
    AtomicOutputFile out(p.string());
    std::ofstream(out.temp_path()) << "new";
    out.Commit();
  }
  EXPECT_EQ(Slurp(p), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

// The paths of a run are compared by identity: a hard link, a symbolic link or another spelling of an input is
// the input; two spellings of one output are one output; an existing file inside an input directory is an input.
TEST(OutputFileTest, RunPathsAreComparedByIdentity) {
  const fs::path d = TempDir("identity");
  const fs::path model = d / "model.bin";
  std::ofstream(model) << "weights";
  fs::create_hard_link(model, d / "hard.bin");
  fs::create_symlink(model, d / "soft.bin");
  fs::create_directory(d / "hf");
  std::ofstream(d / "hf" / "config.json") << "{}";
  const std::vector<RunPath> inputs = {{"--model", model.string()}, {"--text", ""}, {"--folder", (d / "hf").string()},
                                       {"--tokenizer", (d / "absent.model").string()}};
  for (const fs::path& out : {d / "." / "model.bin", d / "hard.bin", d / "soft.bin"}) {
    ExpectThrowWith<IoError>([&] { CheckRunPaths(inputs, std::vector<RunPath>{{"--json", out.string()}}); },
                             {"--json " + out.string() + " is the same file as --model " + model.string()});
  }
  ExpectThrowWith<IoError>(
      [&] { CheckRunPaths(inputs, std::vector<RunPath>{{"--csv", (d / "hf" / "config.json").string()}}); },
      {"--csv", "is a file of --folder"});
  ExpectThrowWith<IoError>(
      [&] {
        CheckRunPaths(inputs, std::vector<RunPath>{{"--json", (d / "new").string()},
                                                   {"--csv", (d / "." / "new").string()}});
      },
      {"--json " + (d / "new").string() + " and --csv", "are the same file"});
  ExpectThrowWith<IoError>([&] { CheckRunPaths(inputs, std::vector<RunPath>{{"--json", ""}}); },
                           {"--json", "the output path is empty"});
  // Different files, a new file in the input folder, an input that does not exist: all fine, nothing written.
  EXPECT_NO_THROW(CheckRunPaths(inputs, std::vector<RunPath>{{"--json", (d / "r.json").string()},
                                                             {"--csv", (d / "hf" / "r.csv").string()},
                                                             {"--plot", (d / "absent.model.png").string()}}));
  EXPECT_EQ(Slurp(model), "weights");
  EXPECT_FALSE(fs::exists(d / "r.json"));
  fs::remove_all(d);
}

// A write killed half-way (SIGKILL, SIGXFSZ) leaves <path>.posenc-tmp-<pid>-XXXXXX; the next write of that path
// removes it when its process is gone, and leaves alone a live process's temporary and every other file.
TEST(OutputFileTest, StaleTemporariesOfDeadRunsAreRemoved) {
  const fs::path d = TempDir("stale");
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // child is gone: its pid names no process
  const fs::path p = d / "out.json";
  const fs::path dead = d / ("out.json.posenc-tmp-" + std::to_string(child) + "-Ab12Cd");
  const fs::path live = d / ("out.json.posenc-tmp-" + std::to_string(::getppid()) + "-Ab12Cd");
  const fs::path user = d / "out.json.tmp.Ab12Cd";
  const fs::path other = d / ("other.json.posenc-tmp-" + std::to_string(child) + "-Ab12Cd");
  for (const fs::path& f : {dead, live, user, other}) std::ofstream(f) << "partial";
  WriteFileAtomically(p.string(), "done");
  EXPECT_EQ(Slurp(p), "done");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(user));
  EXPECT_TRUE(fs::exists(other));
  fs::remove_all(d);
}

}  // namespace
}  // namespace posenc
