#include "posenc/formats/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

void RequireRegular(const std::string& path, std::string_view role, const struct stat& st) {
  if (!S_ISREG(st.st_mode)) {
    throw IoError(fmt::format("cannot read {} '{}': it is {}, not a regular file", role, path, FileKind(st.st_mode)));
  }
}

}  // namespace

std::shared_ptr<const MappedFile> MappedFile::Open(const std::string& path, std::string_view role) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw IoError(fmt::format("cannot open {} '{}': {}", role, path, std::strerror(errno)));
  }
  RequireRegular(path, role, st);
  // O_NONBLOCK: if the path is swapped for a FIFO between stat and open, open does not wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw IoError(fmt::format("cannot open {} '{}': {}", role, path, std::strerror(errno)));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  if (::fstat(fd, &st) != 0) throw IoError(fmt::format("cannot stat '{}': {}", path, std::strerror(errno)));
  RequireRegular(path, role, st);

  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = path;
  if (st.st_size == 0) return file;
  const auto size = static_cast<size_t>(st.st_size);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (p == MAP_FAILED) throw IoError(fmt::format("cannot map '{}' ({} bytes): {}", path, size, std::strerror(errno)));
  file->mapping_ = p;
  file->data_ = static_cast<const uint8_t*>(p);
  file->size_ = size;
  return file;
}

std::shared_ptr<const MappedFile> MappedFile::FromBytes(std::vector<uint8_t> bytes, std::string name) {
  std::shared_ptr<MappedFile> file(new MappedFile());
  file->path_ = std::move(name);
  file->owned_ = std::move(bytes);
  file->data_ = file->owned_.data();
  file->size_ = file->owned_.size();
  return file;
}

MappedFile::~MappedFile() {
  if (mapping_ != nullptr) ::munmap(mapping_, size_);
}

}  // namespace posenc
