// Output files: checked before the work (missing directory, a directory or device in the way), written
// atomically (temp file + rename: complete content, no temporary left behind, the old file intact on failure,
// an existing file's mode kept).
#include "posenc/io/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

}  // namespace
}  // namespace posenc
