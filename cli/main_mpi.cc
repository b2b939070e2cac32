// posenc command-line tool of an MPI build: a process started by mpirun joins the job (MPI_Init) and runs with its
// ranks; one started any other way runs alone, exactly as the build without MPI (MPI is not even initialised).
#include <cstdlib>
#include <exception>
#include <string>

#include <fmt/format.h>

#include "commands.h"
#include "posenc/dist/mpi/mpi_communicator.h"

namespace {

// True when a process manager started this process as a rank: Open MPI's mpirun sets OMPI_COMM_WORLD_SIZE,
// PMIx-based launchers PMIX_RANK, MPICH's Hydra PMI_SIZE.
bool StartedAsRank() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (!StartedAsRank()) return posenc::cli::RunMain(argc, argv);
  try {
    posenc::MpiSession session(&argc, &argv);
    posenc::MpiCommunicator comm;
    posenc::cli::Ranks ranks;
    ranks.comm = &comm;
    ranks.abort = [&session](const std::string& message) { session.Abort(message); };
    ranks.set_timeout = [&comm](double seconds) { comm.set_timeout_s(seconds); };
    return posenc::cli::RunMain(argc, argv, &ranks);
  } catch (const std::exception& e) {  // MPI could not start
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
