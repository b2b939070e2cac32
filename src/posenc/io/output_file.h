// Output files: checked before the work that produces them starts, and written atomically (a temporary file
// in the same directory, then rename), so an interrupted or failed run never leaves a half-written file and
// never destroys the previous one; and the paths of a run are checked together so that no output ever replaces
// an input or another output. Every file posenc writes goes through here.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace posenc {

/// Checks that `path` can be written as an output before any work is done: not empty; if it exists, a
/// regular file (so a directory, /dev/null or a FIFO is never replaced); its directory exists, is a directory
/// and accepts a new file (a temporary file is created there and removed again). `flag` names the option in
/// messages as the caller spells it (the command line "--json", the library "`out_path`").
/// Errors: IoError naming the flag, the path and the reason ("--json /nonexistent/x.json: directory
///         '/nonexistent' does not exist").
void CheckOutputPath(const std::string& path, std::string_view flag);

/// One path of a run and the flag (or derived name) it came from, for messages: {"--out (its .state file)",
/// "ft.bin.state"}.
struct RunPath {
  std::string flag;
  std::string path;
};

/// Checks every path of one run together, before any work: each output passes CheckOutputPath (not empty, a
/// regular file or new, its directory writable); no output is the same file as an input; no two outputs are
/// the same file; no output is an existing file directly inside an input directory (a Hugging Face model
/// folder's config.json). "The same file" is by identity, not by spelling: device and inode after following
/// symbolic links (hard links and `./x` vs `x` match); an output that does not exist yet is identified by its
/// directory's device and inode and its name. Inputs that are empty or do not exist are skipped (their reader
/// reports them). List every path the run writes, derived ones included (`<out>.json`, `<out>.state`,
/// `<stem>.step<N><ext>`, a plot directory's PNGs).
/// Errors: IoError naming both flags and the path ("--json m.bin is the same file as --model m.bin: posenc never
///         replaces an input; write the output elsewhere"), or CheckOutputPath's errors.
void CheckRunPaths(std::span<const RunPath> inputs, std::span<const RunPath> outputs);

/// Creates a new empty temporary file beside `path` (same directory, so a rename is atomic) and returns its
/// descriptor, its name in `temp_path`. The name is `<path>.posenc-tmp-<pid>-XXXXXX`: before creating it,
/// temporaries of `path` in that form whose process no longer exists (a run ended by SIGKILL or SIGXFSZ in the
/// middle of a write) are removed; nothing else is ever removed. `label` starts error messages.
/// Errors: IoError naming `label`, the path, the directory and the system's reason.
int CreateTempBeside(const std::string& path, std::string_view label, std::string& temp_path);

/// Writes `content` to `path` atomically: a temporary file (CreateTempBeside) in the same directory is
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
