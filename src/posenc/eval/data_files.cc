#include "posenc/eval/data_files.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

std::vector<std::string> DefaultDataDirs(const std::string& compiled_data_dir) {
  std::vector<std::string> dirs;
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back((exe.parent_path().parent_path() / "data").string());
    dirs.push_back((exe.parent_path() / "data").string());
    dirs.push_back((exe.parent_path().parent_path() / "share" / "posenc" / "data").string());  // cmake --install
  }
  if (!compiled_data_dir.empty()) dirs.push_back(compiled_data_dir);
  dirs.push_back("data");
  return dirs;
}

std::string FindDataFile(const std::string& relative, const std::vector<std::string>& dirs) {
  std::string looked;
  for (const std::string& d : dirs) {
    const std::filesystem::path p = std::filesystem::path(d) / relative;
    std::error_code ec;
    if (std::filesystem::is_regular_file(p, ec)) return p.lexically_normal().string();
    looked += (looked.empty() ? "" : ", ") + d;
  }
  throw IoError(fmt::format("cannot find {}; looked in: {} (pass its path explicitly)", relative, looked));
}

}  // namespace posenc
