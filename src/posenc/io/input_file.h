// Input files: every file posenc reads by name (checkpoint, tokenizer, text, config) is checked to be a
// regular file before it is opened, so a directory gets a clear message and a FIFO cannot hang the run.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace posenc {

/// Checks, without opening it, that `path` (symbolic links followed) is an existing regular file, and returns
/// its size in bytes. `what` names the file's role in messages ("checkpoint", "tokenizer", "text file").
///
/// Errors:  IoError "<what> '<path>' does not exist", "... is a directory, not a file", "... is a FIFO (named
///          pipe), not a regular file: posenc reads its inputs whole and would wait for a writer", "... is a
///          character device / block device / socket, not a regular file", or the system's reason when the
///          path cannot be examined (permissions, too long, ...).
/// Source:  POSIX stat(2) file types.
int64_t RequireRegularFile(const std::string& path, std::string_view what);

/// Reads a whole regular file (RequireRegularFile first). Errors: as RequireRegularFile; IoError naming the
/// path if it cannot be opened or read.
std::string ReadRegularFile(const std::string& path, std::string_view what);

}  // namespace posenc
