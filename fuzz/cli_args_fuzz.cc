// Fuzz harness: the posenc command line's parsing of numbers and lists. The input is split at newlines into
// arguments after "posenc" (at most 64), and parsed by the real CLI (every subcommand's flags, CLI11's number
// and list conversions, posenc's own flag checks) in CommandMode::kParseOnly: nothing is read, written or
// computed. Allowed outcomes: success, a CLI11 parse error, a posenc::Error; anything else is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "posenc/core/errors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"posenc"};
  std::string current;
  for (size_t i = 0; i < size && args.size() <= 64; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += c;
    }
  }
  if (args.size() <= 64) args.push_back(current);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  CLI::App app{"posenc"};
  app.require_subcommand(1);
  posenc::cli::RegisterCommands(app, posenc::cli::CommandMode::kParseOnly);
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
  } catch (const posenc::Error&) {
  }
  return 0;
}
