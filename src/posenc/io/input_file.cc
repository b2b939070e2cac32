#include "posenc/io/input_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

const char* FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory, not a file";
  if (S_ISFIFO(mode)) {
    return "a FIFO (named pipe), not a regular file: posenc reads its inputs whole and would wait for a writer";
  }
  if (S_ISCHR(mode)) return "a character device, not a regular file";
  if (S_ISBLK(mode)) return "a block device, not a regular file";
  if (S_ISSOCK(mode)) return "a socket, not a regular file";
  return "not a regular file";
}

}  // namespace

int64_t RequireRegularFile(const std::string& path, std::string_view what) {
  if (path.empty()) throw IoError(fmt::format("{}: the path is empty", what));
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) throw IoError(fmt::format("cannot read {} '{}': it does not exist", what, path));
    throw IoError(fmt::format("cannot examine {} '{}': {}", what, path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) throw IoError(fmt::format("{} '{}' is {}", what, path, FileTypeName(st.st_mode)));
  return static_cast<int64_t>(st.st_size);
}

std::string ReadRegularFile(const std::string& path, std::string_view what) {
  RequireRegularFile(path, what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError(fmt::format("cannot open {} '{}': {}", what, path, std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw IoError(fmt::format("cannot read {} '{}'", what, path));
  return ss.str();
}

}  // namespace posenc
