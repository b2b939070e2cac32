// posenc-bench: the timed suites (cli/cmd_bench.cc over bench/*_suite.h) as their own binary, so that posenc itself
// links none of them; `posenc bench ARGS...` runs this binary with ARGS.
#include <CLI/CLI.hpp>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app;
  app.name("posenc-bench");
  posenc::cli::ConfigureBenchCommand(app, posenc::cli::CommandMode::kRun);
  posenc::cli::AddBenchHelpExamplesAndVersion(app);
  return posenc::cli::RunApp(app, argc, argv);
}
