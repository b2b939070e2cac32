// posenc command-line tool: thin front end over the library (see README.md). Built without MPI; main_mpi.cc is
// the entry point of an MPI build.
#include "commands.h"

int main(int argc, char** argv) { return posenc::cli::RunMain(argc, argv); }
