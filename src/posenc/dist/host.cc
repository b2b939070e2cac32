#include "posenc/dist/host.h"

#include <unistd.h>

#include <algorithm>
#include <string_view>
#include <vector>

#include "posenc/dist/fingerprint.h"

namespace posenc {

int CountRanksOnThisHost(Communicator& comm) {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) name[0] = '\0';  // unnamed: counted with the other unnamed
  const uint64_t mine = Fingerprint().Add(std::string_view(name)).value();
  const std::vector<uint64_t> all = comm.AllGather(mine);
  return static_cast<int>(std::count(all.begin(), all.end(), mine));
}

}  // namespace posenc
