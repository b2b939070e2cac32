// What this build of posenc is: its version and the git commit it was configured from (`posenc --version`).
#pragma once

namespace posenc {

/// The project version, "MAJOR.MINOR.PATCH" (CMakeLists.txt's project(VERSION)). Errors: none.
const char* Version();

/// The git commit the build was configured from: 12 hex digits, "-dirty" appended when the working tree had
/// uncommitted changes then; "unknown" outside a git checkout. Baked in when CMake configures, so a commit made
/// after the last configure is not seen. Errors: none.
const char* GitCommit();

}  // namespace posenc
