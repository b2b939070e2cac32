// Each posenc subcommand registers itself on the top-level CLI11 app. Flags bind to a library params struct;
// the callback makes one library call and prints with fmt. Errors propagate to main's single catch.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

void RegisterInspectCommand(CLI::App& app);   // cmd_inspect.cc
void RegisterEvalCommand(CLI::App& app);      // cmd_eval.cc
void RegisterGenerateCommand(CLI::App& app);  // cmd_generate.cc
void RegisterBenchCommand(CLI::App& app);     // cmd_bench.cc
void RegisterDemoCommand(CLI::App& app);      // cmd_demo.cc
void RegisterTokenizeCommand(CLI::App& app);  // cmd_tokenize.cc

}  // namespace posenc::cli
