// The posenc command line as a function: the app, its subcommands, the single catch, the stdout check.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <stdexcept>
#include <system_error>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "option_flags.h"
#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/core/threads.h"

namespace posenc::cli {

void RegisterBenchForward(CLI::App& app, CommandMode mode) {
  CLI::App* cmd = app.add_subcommand(
      "bench", "Benchmarks: runs posenc-bench, the separate benchmark binary beside this posenc, with the "
               "arguments that follow (posenc bench --help shows its options)");
  cmd->prefix_command();  // every argument after `bench`, --help included, is posenc-bench's
  cmd->set_help_flag();
  cmd->callback([cmd, mode] {
    if (mode == CommandMode::kParseOnly) return;
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) throw IoError(fmt::format("posenc bench: cannot find this executable (/proc/self/exe): {}", ec.message()));
    const std::filesystem::path bench = exe.parent_path() / "posenc-bench";
    if (!std::filesystem::is_regular_file(bench, ec)) {
      throw ConfigError(fmt::format(
          "posenc bench runs posenc-bench, which is not beside this posenc ({} does not exist): posenc-bench is "
          "not installed (cmake --install leaves it in the build folder: run <build>/posenc bench there), and it is "
          "built only with the benchmarks (scripts/build.sh, or a configure with -DPOSENC_BUILD_BENCHMARKS=ON; the "
          "`cli` preset of scripts/run.sh builds the main job only)", bench.string()));
    }
    std::vector<std::string> args = cmd->remaining();
    std::vector<char*> argv;
    std::string name = bench.string();
    argv.push_back(name.data());
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::fflush(stdout);
    std::fflush(stderr);
    ::execv(name.c_str(), argv.data());
    throw IoError(fmt::format("posenc bench: cannot run {}: {}", name, std::strerror(errno)));
  });
}

void RegisterCommands(CLI::App& app, CommandMode mode, const Ranks* ranks) {
  RegisterInspectCommand(app, mode);
  RegisterEvalCommand(app, mode, ranks);
  RegisterPasskeyCommand(app, mode);
  RegisterGenerateCommand(app, mode);
  RegisterBenchForward(app, mode);
  RegisterDemoCommand(app, mode);
  RegisterTokenizeCommand(app, mode);
  RegisterFinetuneCommand(app, mode);
  RegisterTrainCommand(app, mode);
}

int RunMain(int argc, char** argv, const Ranks* ranks) {
  CLI::App app{
      "posenc: positional encodings for transformer attention (RoPE and its context extensions, "
      "sinusoidal and learned PE)"};
  app.require_subcommand(1);
  RegisterCommands(app, CommandMode::kRun, ranks);
  AddHelpExamplesAndVersion(app);
  return RunApp(app, argc, argv, ranks);
}

int RunApp(CLI::App& app, int argc, char** argv, const Ranks* ranks) {
  // Several ranks: only eval runs across them; rank 0 alone prints help.
  const bool in_job = ranks != nullptr && ranks->comm != nullptr && ranks->comm->size() > 1;
  int status = 0;
  try {
    const std::vector<CLI::App*> commands = app.get_subcommands([](CLI::App*) { return true; });
    const bool other_command = argc >= 2 && std::strcmp(argv[1], "eval") != 0 &&
                               std::any_of(commands.begin(), commands.end(),
                                           [&](const CLI::App* sub) { return sub->get_name() == argv[1]; });
    if (in_job && other_command) {
      throw std::runtime_error(fmt::format("under mpirun with {} ranks only `posenc eval` runs across them, got "
                                           "`posenc {}` (run it without mpirun or with -np 1)",
                                           ranks->comm->size(), argv[1]));
    }
    CheckOpenMpDefaultThreads();  // before any OpenMP team: OMP_NUM_THREADS=100000 would crash libgomp
    app.parse(argc, argv);
  } catch (const ExitStatus& e) {
    status = e.status;
  } catch (const CLI::ParseError& e) {
    if (in_job && e.get_exit_code() != 0) ranks->abort(e.what());  // the other ranks may be waiting on this one
    if (in_job && ranks->comm->rank() != 0) return e.get_exit_code();  // --help: printed by rank 0
    status = app.exit(e);
  } catch (const std::bad_alloc&) {
    std::fflush(stdout);
    const std::string what = OutOfMemoryMessage();
    if (in_job) ranks->abort(what);
    std::fprintf(stderr, "error: %s\n", what.c_str());
    status = 1;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    // The library names its options as fields (`eval_tokens`): shown as this command line's flags.
    const char* what = e.what();
    std::string translated;
    try {
      translated = WithFlags(what);
      what = translated.c_str();
    } catch (const std::bad_alloc&) {  // out of memory: the message as the library wrote it
    }
    if (in_job) ranks->abort(what);  // ends every rank, naming this one
    std::fprintf(stderr, "error: %s\n", what);  // stdio, not fmt: reporting must not throw (stderr may be full)
    status = 1;
  }
  // Output still buffered is written now; a stream that could not take all of it fails the run.
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    if (status == 0) {
      std::fprintf(stderr, "error: cannot write to standard output: %s\n",
                   errno != 0 ? std::strerror(errno) : "an earlier write failed (disk full, closed pipe?)");
    }
    return status != 0 ? status : 1;
  }
  return status;
}

}  // namespace posenc::cli
