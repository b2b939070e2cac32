// posenc command-line tool: thin front end over the library (see README.md).
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: positional encodings for transformer attention (RoPE and its context extensions, "
               "sinusoidal and learned PE)"};
  app.require_subcommand(1);
  posenc::cli::RegisterInspectCommand(app);
  posenc::cli::RegisterEvalCommand(app);
  posenc::cli::RegisterGenerateCommand(app);
  posenc::cli::RegisterBenchCommand(app);
  posenc::cli::RegisterDemoCommand(app);
  posenc::cli::RegisterTokenizeCommand(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
  return 0;
}
