#include "posenc/core/version.h"

// Both come from CMakeLists.txt (compile definitions of this file alone, so a new commit recompiles only it).
#ifndef POSENC_VERSION
#define POSENC_VERSION "unknown"
#endif
#ifndef POSENC_GIT_COMMIT
#define POSENC_GIT_COMMIT "unknown"
#endif

namespace posenc {

const char* Version() { return POSENC_VERSION; }

const char* GitCommit() { return POSENC_GIT_COMMIT; }

}  // namespace posenc
