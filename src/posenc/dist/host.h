// Which ranks share this machine: the memory a rank may count on is the machine's divided among them.
#pragma once

#include "posenc/dist/communicator.h"

namespace posenc {

/// How many ranks of `comm` (this one included) run on this machine: the ranks whose host name (gethostname) has
/// the same fingerprint as this rank's. Collective (one AllGather). Always >= 1.
/// Errors: DistError from the communicator.
int CountRanksOnThisHost(Communicator& comm);

}  // namespace posenc
