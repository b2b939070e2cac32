#include "posenc/eval/plot.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <sstream>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/eval/report.h"
#include "posenc/io/output_file.h"

namespace posenc {
namespace {

// A gnuplot single-quoted string ('' stands for a quote inside).
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

// A shell single-quoted word.
std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    const std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0 && std::filesystem::is_regular_file(candidate)) return candidate;
  }
  return "";
}

PlotOutcome PlotReport(const EvalReport& report, const std::string& png_path) {
  const std::string gnuplot = FindOnPath("gnuplot");
  if (gnuplot.empty()) {
    return {false, fmt::format("--plot: gnuplot was not found on PATH, so {} was not drawn (install gnuplot, "
                               "e.g. Debian's gnuplot-nox); the results above are complete", png_path)};
  }
  // Methods in first-seen order; per method: (ctx, ppl) and, at the largest ctx, its buckets.
  std::vector<std::string> methods;
  std::map<std::string, std::vector<const EvalRow*>> by_method;
  int64_t max_ctx = 0;
  for (const EvalRow& row : report.rows) {
    const std::string m(EvalMethodName(row.method));
    if (!by_method.count(m)) methods.push_back(m);
    by_method[m].push_back(&row);
    max_ctx = std::max(max_ctx, row.ctx);
  }
  std::string ppl_dat, bucket_dat, xtics;
  for (const std::string& m : methods) {
    for (const EvalRow* row : by_method[m]) ppl_dat += fmt::format("{} {:.9g}\n", row->ctx, row->result.ppl);
    ppl_dat += "\n\n";
    for (const EvalRow* row : by_method[m]) {
      if (row->ctx != max_ctx) continue;
      int i = 0;
      for (const BucketResult& b : row->result.buckets) bucket_dat += fmt::format("{} {:.9g}\n", i++, b.ppl);
    }
    bucket_dat += "\n\n";
  }
  for (const EvalRow& row : report.rows) {
    if (row.ctx != max_ctx) continue;
    int i = 0;
    for (const BucketResult& b : row.result.buckets) {
      xtics += fmt::format("{}\"{}-{}\" {}", i == 0 ? "" : ", ", b.from, b.to, i);
      ++i;
    }
    break;
  }

  AtomicOutputFile png(png_path);  // gnuplot draws into a temporary file beside png_path, renamed when done
  char tmpl[] = "/tmp/posenc-plot-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw IoError("--plot: cannot create a temporary directory in /tmp");
  const std::string dir = tmpl;
  const std::string ppl_file = dir + "/ppl_by_ctx.dat", bucket_file = dir + "/ppl_by_bucket.dat";
  const std::string script_file = dir + "/plot.gp";
  std::string plot_ctx, plot_bucket;
  for (size_t i = 0; i < methods.size(); ++i) {
    plot_ctx += fmt::format("{}{} index {} using 1:2 with linespoints lw 2 title {}", i ? ", " : "", Quote(ppl_file),
                            i, Quote(methods[i]));
    plot_bucket += fmt::format("{}{} index {} using 1:2 with linespoints lw 2 title {}", i ? ", " : "",
                               Quote(bucket_file), i, Quote(methods[i]));
  }
  const std::string script = fmt::format(
      "set terminal pngcairo size 1400,560 noenhanced font ',11'\n"
      "set output {}\n"
      "set multiplot layout 1,2 title {}\n"
      "set grid\nset key top left\nset logscale x 2\nset logscale y\n"
      "set xlabel 'context length L (tokens)'\nset ylabel 'perplexity'\n"
      "set title 'perplexity by context length'\n"
      "plot {}\n"
      "unset logscale x\nset xtics ({})\n"
      "set xlabel 'in-window position bucket (tokens)'\n"
      "set title 'perplexity by position at L = {}'\n"
      "plot {}\n"
      "unset multiplot\n",
      Quote(png.temp_path()),
      Quote(fmt::format("{} on {} (trained at L0 = {})", std::filesystem::path(report.model_path).filename().string(),
                        std::filesystem::path(report.text_path).filename().string(), report.config.train_ctx)),
      plot_ctx, xtics, max_ctx, plot_bucket);
  PlotOutcome outcome;
  try {
    WriteFileAtomically(ppl_file, ppl_dat);
    WriteFileAtomically(bucket_file, bucket_dat);
    WriteFileAtomically(script_file, script);
    const std::string cmd = fmt::format("{} {} 1>&2", ShellQuote(gnuplot), ShellQuote(script_file));
    const int status = std::system(cmd.c_str());
    if (status == 0) {
      png.Commit();
      outcome = {true, fmt::format("wrote {}", png_path)};
    } else {
      outcome = {false, fmt::format("--plot: gnuplot ({}) failed with status {}; {} was not drawn", gnuplot, status,
                                    png_path)};
    }
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    throw;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return outcome;
}

}  // namespace posenc
