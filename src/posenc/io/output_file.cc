#include "posenc/io/output_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

std::string DirectoryOf(const std::string& path) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// The mode a newly created file gets: 0666 less the process umask (umask can only be read by setting it).
mode_t NewFileMode() {
  const mode_t mask = ::umask(0);
  ::umask(mask);
  return static_cast<mode_t>(0666 & ~mask);
}

// Creates <path>.tmp.XXXXXX next to path; returns its fd and fills temp_path. Errors name `label`.
int CreateTemp(const std::string& path, std::string_view label, std::string& temp_path) {
  std::vector<char> name(path.begin(), path.end());
  const std::string suffix = ".tmp.XXXXXX";
  name.insert(name.end(), suffix.begin(), suffix.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw IoError(fmt::format("{} {}: cannot create a file in directory '{}': {}", label, path, DirectoryOf(path),
                              std::strerror(errno)));
  }
  temp_path.assign(name.data());
  return fd;
}

void CheckTarget(const std::string& path, std::string_view label) {
  if (path.empty()) throw IoError(fmt::format("{}: the output path is empty", label));
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      throw IoError(fmt::format("{} {}: exists and is not a regular file ({}); posenc only replaces regular files",
                                label, path, S_ISDIR(st.st_mode) ? "a directory" : "a device, FIFO or socket"));
    }
  } else if (errno != ENOENT && errno != ENOTDIR) {  // ENOTDIR: a parent is a file, said below
    throw IoError(fmt::format("{} {}: cannot examine it: {}", label, path, std::strerror(errno)));
  }
  const std::string dir = DirectoryOf(path);
  struct stat dst {};
  if (::stat(dir.c_str(), &dst) != 0) {
    if (errno == ENOTDIR) throw IoError(fmt::format("{} {}: a parent of '{}' is not a directory", label, path, dir));
    if (errno == ENOENT) throw IoError(fmt::format("{} {}: directory '{}' does not exist", label, path, dir));
    throw IoError(fmt::format("{} {}: cannot examine directory '{}': {}", label, path, dir, std::strerror(errno)));
  }
  if (!S_ISDIR(dst.st_mode)) throw IoError(fmt::format("{} {}: '{}' is not a directory", label, path, dir));
}

}  // namespace

void CheckOutputPath(const std::string& path, std::string_view flag) {
  CheckTarget(path, flag);
  std::string temp;
  const int fd = CreateTemp(path, flag, temp);  // the directory accepts a new file
  ::close(fd);
  ::unlink(temp.c_str());
}

namespace {

// Writes `content` to a new temporary file beside `path` (flushed, synced, with the mode `path` has or a new file
// would get) and returns its name; on failure nothing is left behind.
std::string WriteTemp(const std::string& path, std::string_view content) {
  const std::string label = "cannot write";
  CheckTarget(path, label);
  std::string temp;
  const int fd = CreateTemp(path, label, temp);
  auto fail = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::close(fd);
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write {}: {} ({}); the file was left as it was", path, what, reason));
  };
  struct stat st {};
  const mode_t mode = ::stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : NewFileMode();
  if (::fchmod(fd, mode) != 0) fail("setting the file mode failed");
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(fmt::format("writing {} bytes failed after {}", content.size(), done));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) fail("flushing to disk failed");
  if (::close(fd) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write {}: closing failed ({}); the file was left as it was", path, reason));
  }
  return temp;
}

void RenameInto(const std::string& temp, const std::string& path) {
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp.c_str());
    throw IoError(fmt::format("cannot write {}: renaming the finished file into place failed ({})", path, reason));
  }
}

}  // namespace

void WriteFileAtomically(const std::string& path, std::string_view content) {
  RenameInto(WriteTemp(path, content), path);
}

void WriteFilesAtomically(std::span<const std::pair<std::string, std::string>> files) {
  std::vector<std::string> temps;
  try {
    for (const auto& [path, content] : files) temps.push_back(WriteTemp(path, content));
  } catch (...) {
    for (const std::string& t : temps) ::unlink(t.c_str());
    throw;
  }
  for (size_t i = 0; i < files.size(); ++i) RenameInto(temps[i], files[i].first);
}

AtomicOutputFile::AtomicOutputFile(std::string path) : path_(std::move(path)) {
  CheckTarget(path_, "cannot write");
  const int fd = CreateTemp(path_, "cannot write", temp_path_);
  struct stat st {};
  const mode_t mode = ::stat(path_.c_str(), &st) == 0 ? (st.st_mode & 07777) : NewFileMode();
  (void)::fchmod(fd, mode);
  ::close(fd);
}

AtomicOutputFile::~AtomicOutputFile() {
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicOutputFile::Commit() {
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    const std::string reason = std::strerror(errno);
    ::unlink(temp_path_.c_str());
    committed_ = true;  // nothing left to remove
    throw IoError(fmt::format("cannot write {}: renaming the finished file into place failed ({})", path_, reason));
  }
  committed_ = true;
}

}  // namespace posenc
