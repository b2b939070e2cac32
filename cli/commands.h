// Each posenc subcommand registers itself on the top-level CLI11 app. Flags bind to a library params struct;
// the callback makes one library call and prints with fmt. Errors propagate to main's single catch.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>

#include "posenc/dist/communicator.h"

namespace posenc::cli {

/// What a subcommand's callback does once CLI11 has parsed its flags.
///   kRun:       convert the flags to the library's options, check the output paths, make the library call,
///               print.
///   kParseOnly: convert the flags (names to enums, number lists to parameters, the checks that need no file)
///               and stop: nothing is read, written or computed. The CLI fuzz harness parses with it.
enum class CommandMode { kRun, kParseOnly };

/// The ranks of an MPI job this process is part of (cli/main_mpi.cc sets it up under mpirun).
struct Ranks {
  Communicator* comm = nullptr;  // this rank's endpoint; null: a process on its own
  /// Ends the whole job from this rank with a message naming it (MPI_Abort); set with comm.
  std::function<void(const std::string& message)> abort;
  /// Sets how long a rank waits for another before the communicator gives up (seconds); set with comm.
  std::function<void(double seconds)> set_timeout;
};

/// Registers every subcommand (inspect, eval, passkey, generate, bench (a forward to posenc-bench), demo, tokenize,
/// finetune, train) on `app`.
/// `ranks`: the job's ranks (only eval runs across them); null when not started by mpirun.
void RegisterCommands(CLI::App& app, CommandMode mode = CommandMode::kRun, const Ranks* ranks = nullptr);

void RegisterInspectCommand(CLI::App& app, CommandMode mode);   // cmd_inspect.cc
void RegisterEvalCommand(CLI::App& app, CommandMode mode, const Ranks* ranks);  // cmd_eval.cc
void RegisterGenerateCommand(CLI::App& app, CommandMode mode);  // cmd_generate.cc
/// `posenc bench ARGS...` runs `posenc-bench ARGS...` (execv), the benchmark binary built beside posenc; a
/// ConfigError saying how to build it when it is not there. The suites are not linked into posenc. run_main.cc.
void RegisterBenchForward(CLI::App& app, CommandMode mode);
/// posenc-bench's options and callback on `app` (its own top level): the timed suites of bench/*_suite.h.
/// cmd_bench.cc, linked into posenc-bench only.
void ConfigureBenchCommand(CLI::App& app, CommandMode mode);
void RegisterDemoCommand(CLI::App& app, CommandMode mode);      // cmd_demo.cc
void RegisterTokenizeCommand(CLI::App& app, CommandMode mode);  // cmd_tokenize.cc
void RegisterFinetuneCommand(CLI::App& app, CommandMode mode);  // cmd_finetune.cc
void RegisterTrainCommand(CLI::App& app, CommandMode mode);     // cmd_train.cc
void RegisterPasskeyCommand(CLI::App& app, CommandMode mode);   // cmd_passkey.cc

/// Thrown by a subcommand that ends without an error but with a status other than 0 (a run stopped by Ctrl-C:
/// 130, by SIGTERM: 143, the shell's 128 + signal); RunMain returns `status`, its output already printed.
struct ExitStatus {
  int status;
};

/// Ends the --help of the top level and of every subcommand with examples, and adds --version (version, git
/// commit, the kernels' SIMD targets, the BLAS in use). Call after RegisterCommands. cli/help_examples.cc.
void AddHelpExamplesAndVersion(CLI::App& app);
/// The same for posenc-bench's top level (`app` configured by ConfigureBenchCommand): its examples and --version.
void AddBenchHelpExamplesAndVersion(CLI::App& app);

/// Runs the posenc command line: parses argv, runs the subcommand, and turns every error into a message on
/// stderr and a non-zero status. Standard output is flushed and checked at the end: a write error there (a
/// full disk, `> /dev/full`, a closed pipe) is an error too, so a truncated result never exits 0.
/// Under mpirun (`ranks` set) with several ranks: only `posenc eval` runs (another subcommand is refused; with one
/// rank everything runs as usual), rank 0 alone prints results, help and files, and an error on any rank ends
/// the whole job through ranks->abort, naming the rank.
int RunMain(int argc, char** argv, const Ranks* ranks = nullptr);

/// RunMain's parse, single catch and standard-output check for an `app` already configured (posenc's, or
/// posenc-bench's in cli/bench_main.cc): returns the process status.
int RunApp(CLI::App& app, int argc, char** argv, const Ranks* ranks = nullptr);

/// Adds --parse-special (Tokenizer::set_parse_special) bound to *on; `llama_cpp_default` names the llama.cpp
/// command whose reading of a text the default matches ("llama-perplexity", ...).
inline void AddParseSpecialFlag(CLI::App* cmd, bool* on, const std::string& llama_cpp_default) {
  cmd->add_flag("--parse-special", *on,
                "match the special tokens written in the text (<|endoftext|>, <|im_start|>, <s>) as their ids, as "
                "Hugging Face's tokenizer(text) does (default: they are plain characters, as llama.cpp's " +
                    llama_cpp_default + ")");
}

}  // namespace posenc::cli
