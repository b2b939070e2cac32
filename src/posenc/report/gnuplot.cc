#include "posenc/report/gnuplot.h"

#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>

#include "posenc/core/errors.h"
#include "posenc/io/output_file.h"

namespace posenc {
namespace {

// A shell-quoted word: 'text' with every ' written as '\''.
std::string ShellQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

struct GnuplotRun {
  int status = 0;  // exit status (or -1 if it could not be started)
  std::string stderr_text;
};

// Runs `gnuplot` on `script` via stdin; its stdout and stderr go to a temporary file that is read back.
GnuplotRun RunScript(const std::filesystem::path& gnuplot, const std::string& script) {
  char tmpl[] = "/tmp/posenc_gnuplot_XXXXXX";
  const int fd = mkstemp(tmpl);
  if (fd < 0) throw IoError("cannot create a temporary file for gnuplot's messages in /tmp");
  close(fd);
  const std::string log = tmpl;
  const std::string command = fmt::format("{} >{} 2>&1", ShellQuote(gnuplot.string()), ShellQuote(log));
  GnuplotRun run;
  FILE* pipe = popen(command.c_str(), "w");
  if (pipe == nullptr) {
    std::remove(log.c_str());
    throw IoError(fmt::format("cannot start gnuplot ({})", gnuplot.string()));
  }
  // A gnuplot that dies early must not take this process down with SIGPIPE: ignore it while writing.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  std::fwrite(script.data(), 1, script.size(), pipe);
  const int raw = pclose(pipe);
  sigaction(SIGPIPE, &previous, nullptr);
  run.status = raw == -1 ? -1 : (WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw));
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  run.stderr_text = ss.str();
  std::remove(log.c_str());
  return run;
}

}  // namespace

std::optional<std::filesystem::path> GnuplotPath() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return std::nullopt;
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::filesystem::path candidate = std::filesystem::path(dir) / "gnuplot";
    if (access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate)) return candidate;
  }
  return std::nullopt;
}

std::string GnuplotMissingMessage() {
  return "gnuplot was not found on PATH, so no plots were written; install it (Debian: apt-get install "
         "gnuplot-nox) and run again";
}

std::string GnuplotPngTerminal() {
  static std::once_flag once;
  static std::string terminal;
  static std::string failure;
  std::call_once(once, [] {
    const std::optional<std::filesystem::path> gnuplot = GnuplotPath();
    if (!gnuplot) {
      failure = GnuplotMissingMessage();
      return;
    }
    for (const char* candidate : {"pngcairo", "png"}) {
      if (RunScript(*gnuplot, fmt::format("set terminal {}\n", candidate)).status == 0) {
        terminal = candidate;
        return;
      }
    }
    failure = fmt::format("gnuplot ({}) has neither the pngcairo nor the png terminal", gnuplot->string());
  });
  if (terminal.empty()) throw IoError(failure);
  return terminal;
}

std::string GnuplotQuote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

void WriteGnuplotPng(const std::filesystem::path& png, int width, int height, const std::vector<GnuplotData>& data,
                     const std::string& body) {
  const std::optional<std::filesystem::path> gnuplot = GnuplotPath();
  if (!gnuplot) throw IoError(GnuplotMissingMessage());
  std::string script;
  for (const GnuplotData& block : data) {
    script += fmt::format("${} << EOD\n", block.name);
    for (const std::string& line : block.lines) script += line + "\n";
    script += "EOD\n";
  }
  script += fmt::format("set terminal {} size {},{}\n", GnuplotPngTerminal(), width, height);
  AtomicOutputFile out(png.string());  // gnuplot draws into a temporary file beside png, renamed when done
  script += fmt::format("set output {}\n", GnuplotQuote(out.temp_path()));
  script += body;
  script += "\nset output\n";
  const GnuplotRun run = RunScript(*gnuplot, script);
  if (run.status != 0) {
    throw IoError(
        fmt::format("gnuplot exited with status {} while writing {}: {}", run.status, png.string(), run.stderr_text));
  }
  std::error_code ec;
  if (std::filesystem::file_size(out.temp_path(), ec) == 0) {
    throw IoError(fmt::format("gnuplot wrote no PNG at {}: {}", png.string(), run.stderr_text));
  }
  out.Commit();
}

void EnsurePlotDir(const std::filesystem::path& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec)) {
    if (!std::filesystem::is_directory(dir, ec)) {
      throw IoError(fmt::format("plot folder {} exists and is not a directory", dir.string()));
    }
    return;
  }
  std::filesystem::create_directories(dir, ec);
  if (ec) throw IoError(fmt::format("cannot create the plot folder {}: {}", dir.string(), ec.message()));
}

}  // namespace posenc
