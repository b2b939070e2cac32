// Each posenc subcommand registers itself on the top-level CLI11 app. Flags bind to a library params struct;
// the callback makes one library call and prints with fmt. Errors propagate to main's single catch.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

/// What a subcommand's callback does once CLI11 has parsed its flags.
///   kRun:       convert the flags to the library's options, check the output paths, make the library call,
///               print.
///   kParseOnly: convert the flags (names to enums, number lists to parameters, the checks that need no file)
///               and stop: nothing is read, written or computed. The CLI fuzz harness parses with it.
enum class CommandMode { kRun, kParseOnly };

/// Registers every subcommand (inspect, eval, generate, bench, demo, tokenize, finetune, train) on `app`.
void RegisterCommands(CLI::App& app, CommandMode mode = CommandMode::kRun);

void RegisterInspectCommand(CLI::App& app, CommandMode mode);   // cmd_inspect.cc
void RegisterEvalCommand(CLI::App& app, CommandMode mode);      // cmd_eval.cc
void RegisterGenerateCommand(CLI::App& app, CommandMode mode);  // cmd_generate.cc
void RegisterBenchCommand(CLI::App& app, CommandMode mode);     // cmd_bench.cc
void RegisterDemoCommand(CLI::App& app, CommandMode mode);      // cmd_demo.cc
void RegisterTokenizeCommand(CLI::App& app, CommandMode mode);  // cmd_tokenize.cc
void RegisterFinetuneCommand(CLI::App& app, CommandMode mode);  // cmd_finetune.cc
void RegisterTrainCommand(CLI::App& app, CommandMode mode);     // cmd_train.cc

/// Runs the posenc command line: parses argv, runs the subcommand, and turns every error into a message on
/// stderr and a non-zero status. Standard output is flushed and checked at the end: a write error there (a
/// full disk, `> /dev/full`, a closed pipe) is an error too, so a truncated result never exits 0.
int RunMain(int argc, char** argv);

}  // namespace posenc::cli
