// Input files: a regular file is read whole; a missing path, a directory, a FIFO or a device is refused before
// anything opens it, with the role and the kind of file in the message.
#include "posenc/io/input_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;

void ExpectIoError(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error";
  } catch (const IoError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

TEST(InputFileTest, RegularFilesAreReadWhole) {
  const fs::path p = fs::temp_directory_path() / ("posenc_input_test_" + std::to_string(::getpid()));
  std::ofstream(p, std::ios::binary) << std::string("ab\0cd", 5);
  EXPECT_EQ(RequireRegularFile(p.string(), "text file"), 5);
  EXPECT_EQ(ReadRegularFile(p.string(), "text file"), std::string("ab\0cd", 5));
  fs::remove(p);
}

TEST(InputFileTest, OtherKindsAreRefusedBeforeOpening) {
  const fs::path d = fs::temp_directory_path() / ("posenc_input_dir_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directory(d);
  ExpectIoError([&] { ReadRegularFile(d.string(), "tokenizer"); }, {"tokenizer", d.string(), "is a directory"});
  const fs::path fifo = d / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectIoError([&] { ReadRegularFile(fifo.string(), "config file"); }, {"config file", "FIFO", "wait for a writer"});
  ExpectIoError([] { ReadRegularFile("/dev/zero", "checkpoint"); }, {"checkpoint", "character device"});
  ExpectIoError([&] { ReadRegularFile((d / "missing").string(), "text file"); }, {"text file", "does not exist"});
  ExpectIoError([] { ReadRegularFile("", "text file"); }, {"text file", "empty"});
  fs::remove_all(d);
}

}  // namespace
}  // namespace posenc
