// posenc command-line tool: thin front end over the library (see README.md).
#include "commands.h"

int main(int argc, char** argv) { return posenc::cli::RunMain(argc, argv); }
