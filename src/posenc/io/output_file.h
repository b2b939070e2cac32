// Output files: checked before the work that produces them starts, and written atomically (a temporary file
// in the same directory, then rename), so an interrupted or failed run never leaves a half-written file and
// never destroys the previous one. Every file posenc writes goes through here.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace posenc {

/// Checks that `path` can be written as an output before any work is done: not empty; if it exists, a
/// regular file (so a directory, /dev/null or a FIFO is never replaced); its directory exists, is a directory
/// and accepts a new file (a temporary file is created there and removed again). `flag` names the option in
/// messages ("--json").
/// Errors: IoError naming the flag, the path and the reason ("--json /nonexistent/x.json: directory
///         '/nonexistent' does not exist").
void CheckOutputPath(const std::string& path, std::string_view flag);

/// Writes `content` to `path` atomically: a temporary file `<path>.tmp.XXXXXX` in the same directory is
/// written, flushed and synced, given the mode a new file would get (0666 less the umask; an existing file's
/// mode is kept), then renamed over `path`. On any failure the temporary file is removed and `path` is left
/// as it was.
/// Errors: IoError naming the path and the system's reason (as CheckOutputPath, plus write errors such as a
///         full disk).
void WriteFileAtomically(const std::string& path, std::string_view content);

/// Writes several files (path, content) as one: every file's temporary is written and synced first (any failure
/// removes the temporaries and leaves every path as it was), then each is renamed into place. So a run whose
/// results go to several files (--json and --csv) leaves all of them or none, except if a rename itself fails
/// (then the files before it are in place and the error names the path).
/// Errors: as WriteFileAtomically, naming the path that failed.
void WriteFilesAtomically(std::span<const std::pair<std::string, std::string>> files);

/// For outputs that another program writes (gnuplot's PNG): a temporary path in the destination's directory
/// to hand to the writer; Commit() renames it over the destination; the destructor removes it if Commit()
/// was not reached. Not copyable.
class AtomicOutputFile {
 public:
  /// Creates the (empty) temporary file next to `path`. Errors: as CheckOutputPath.
  explicit AtomicOutputFile(std::string path);
  ~AtomicOutputFile();
  AtomicOutputFile(const AtomicOutputFile&) = delete;
  AtomicOutputFile& operator=(const AtomicOutputFile&) = delete;

  /// Where the writer writes (same directory as the destination, so the rename is atomic).
  const std::string& temp_path() const { return temp_path_; }
  /// Renames the temporary file over the destination. Errors: IoError if the rename fails (the temporary
  /// file is removed).
  void Commit();

 private:
  std::string path_;
  std::string temp_path_;
  bool committed_ = false;
};

}  // namespace posenc
