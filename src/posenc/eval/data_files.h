// Where the bundled model, tokenizer and texts (repo data/) are found when the user names none.
#pragma once

#include <string>
#include <vector>

namespace posenc {

/// Candidate data directories, in order: <directory of the running executable>/../data (build/posenc ->
/// data/), <directory of the executable>/data, <directory of the executable>/../share/posenc/data (an installed
/// posenc), `compiled_data_dir` (the source tree's data/ baked in at build
/// time; skipped when empty), ./data. Duplicates are kept (harmless).
std::vector<std::string> DefaultDataDirs(const std::string& compiled_data_dir);

/// The first dir + "/" + relative that exists as a regular file.
/// Errors: IoError "cannot find <relative>; looked in: a, b, c (pass its path explicitly)".
std::string FindDataFile(const std::string& relative, const std::vector<std::string>& dirs);

}  // namespace posenc
