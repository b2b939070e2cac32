// Output files: checked before the work (missing directory, a directory or device in the way), written
// atomically (temp file + rename: complete content, no temporary left behind, the old file intact on failure,
// an existing file's mode kept).
#include "posenc/io/output_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <vector>
#include <fstream>
#include <string>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

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

void ExpectIoError(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(OutputFileTest, CheckRefusesWhatCannotBeWritten) {
  ExpectIoError([] { CheckOutputPath("/nonexistent/x.json", "--json"); },
                {"--json", "/nonexistent/x.json", "directory '/nonexistent' does not exist"});
  const fs::path d = TempDir("check");
  ExpectIoError([&] { CheckOutputPath(d.string(), "--csv"); }, {"--csv", "is not a regular file", "a directory"});
  ExpectIoError([] { CheckOutputPath("/dev/null", "--plot"); }, {"--plot", "/dev/null", "not a regular file"});
  ExpectIoError([] { CheckOutputPath("", "--json"); }, {"--json", "empty"});
  const fs::path file = d / "f";
  std::ofstream(file) << "x";
  ExpectIoError([&] { CheckOutputPath((file / "y.json").string(), "--json"); }, {"is not a directory"});
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
  ExpectIoError([&] { WriteFileAtomically(p.string(), "data"); }, {"not a regular file"});
  EXPECT_TRUE(fs::is_directory(p));
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
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
