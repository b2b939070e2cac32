#include "posenc/io/output_file.h"

#include <fcntl.h>
#include <signal.h>
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

constexpr std::string_view kTempMarker = ".posenc-tmp-";

// Removes <path>.posenc-tmp-<pid>-XXXXXX files (regular files only) whose process <pid> no longer exists.
void RemoveStaleTemps(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + std::string(kTempMarker);
  std::error_code ec;
  std::filesystem::directory_iterator it(DirectoryOf(path), ec);
  if (ec) return;  // CheckTarget / mkstemp report an unusable directory
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const std::string rest = name.substr(prefix.size());  // <pid>-XXXXXX
    const size_t dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || rest.size() - dash - 1 != 6) continue;
    long pid = 0;
    bool digits = true;
    for (size_t i = 0; i < dash; ++i) {
      if (rest[i] < '0' || rest[i] > '9' || pid > 100000000) {
        digits = false;
        break;
      }
      pid = pid * 10 + (rest[i] - '0');
    }
    if (!digits || pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(entry.path().c_str());
  }
}

}  // namespace

int CreateTempBeside(const std::string& path, std::string_view label, std::string& temp_path) {
  RemoveStaleTemps(path);
  const std::string templ = fmt::format("{}{}{}-XXXXXX", path, kTempMarker, ::getpid());
  std::vector<char> name(templ.begin(), templ.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) {
    throw IoError(fmt::format("{} {}: cannot create a file in directory '{}': {}", label, path, DirectoryOf(path),
                              std::strerror(errno)));
  }
  temp_path.assign(name.data());
  return fd;
}

namespace {

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
  const int fd = CreateTempBeside(path, flag, temp);  // the directory accepts a new file
  ::close(fd);
  ::unlink(temp.c_str());
}

namespace {

// A file's identity: device and inode of the file (links followed), or, for a path that does not exist, of its
// directory plus its name.
struct FileKey {
  bool known = false;  // false: neither the file nor its directory could be examined
  bool exists = false;
  bool is_dir = false;
  dev_t dev = 0;
  ino_t ino = 0;
  std::string name;  // only for a file that does not exist
  bool operator==(const FileKey& o) const {
    return known && o.known && exists == o.exists && dev == o.dev && ino == o.ino && name == o.name;
  }
};

FileKey KeyOf(const std::string& path) {
  FileKey k;
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    k.known = k.exists = true;
    k.is_dir = S_ISDIR(st.st_mode);
    k.dev = st.st_dev;
    k.ino = st.st_ino;
    return k;
  }
  const std::string name = std::filesystem::path(path).filename().string();
  if (name.empty() || name == "." || name == ".." || ::stat(DirectoryOf(path).c_str(), &st) != 0) return k;
  k.known = true;
  k.dev = st.st_dev;
  k.ino = st.st_ino;
  k.name = name;
  return k;
}

// The identity of the directory that holds `path` (links of the directory followed).
FileKey DirectoryKeyOf(const std::string& path) { return KeyOf(DirectoryOf(path)); }

}  // namespace

void CheckRunPaths(std::span<const RunPath> inputs, std::span<const RunPath> outputs) {
  for (const RunPath& out : outputs) {
    if (out.path.empty()) throw IoError(fmt::format("{}: the output path is empty", out.flag));
  }
  std::vector<FileKey> in_keys;
  for (const RunPath& in : inputs) in_keys.push_back(in.path.empty() ? FileKey{} : KeyOf(in.path));
  std::vector<FileKey> out_keys;
  for (const RunPath& out : outputs) {
    const FileKey key = KeyOf(out.path);
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!in_keys[i].exists) continue;
      if (key == in_keys[i]) {
        throw IoError(fmt::format("{} {} is the same file as {} {}: posenc never replaces an input; write the "
                                  "output elsewhere", out.flag, out.path, inputs[i].flag, inputs[i].path));
      }
      if (in_keys[i].is_dir && key.exists && DirectoryKeyOf(out.path) == in_keys[i]) {
        throw IoError(fmt::format("{} {} is a file of {} {} (a directory the run reads): posenc never replaces "
                                  "an input; write the output elsewhere", out.flag, out.path, inputs[i].flag,
                                  inputs[i].path));
      }
    }
    for (size_t j = 0; j < out_keys.size(); ++j) {
      if (key == out_keys[j]) {
        throw IoError(fmt::format("{} {} and {} {} are the same file: one output would replace the other; give "
                                  "each its own path", outputs[j].flag, outputs[j].path, out.flag, out.path));
      }
    }
    out_keys.push_back(key);
  }
  for (const RunPath& out : outputs) CheckOutputPath(out.path, out.flag);
}

namespace {

// Writes `content` to a new temporary file beside `path` (flushed, synced, with the mode `path` has or a new file
// would get) and returns its name; on failure nothing is left behind.
std::string WriteTemp(const std::string& path, std::string_view content) {
  const std::string label = "cannot write";
  CheckTarget(path, label);
  std::string temp;
  const int fd = CreateTempBeside(path, label, temp);
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
  const int fd = CreateTempBeside(path_, "cannot write", temp_path_);
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
