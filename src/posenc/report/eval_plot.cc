#include "posenc/report/eval_plot.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/report/gnuplot.h"

namespace posenc {

PlotOutcome PlotReport(const EvalReport& report, const std::string& png_path) {
  if (!GnuplotPath()) {
    return {false, fmt::format("--plot: {} was not drawn: {}; the results above are complete", png_path,
                               GnuplotMissingMessage())};
  }
  // Methods in first-seen order; per method: (ctx, ppl) and, at the largest ctx, its buckets. One data block per
  // panel, a method per index (blocks separated by two blank lines).
  std::vector<std::string> methods;
  std::map<std::string, std::vector<const EvalRow*>> by_method;
  int64_t max_ctx = 0;
  for (const EvalRow& row : report.rows) {
    const std::string m(EvalMethodName(row.method));
    if (!by_method.count(m)) methods.push_back(m);
    by_method[m].push_back(&row);
    max_ctx = std::max(max_ctx, row.ctx);
  }
  GnuplotData by_ctx{"ppl_by_ctx", {}}, by_bucket{"ppl_by_bucket", {}};
  for (const std::string& m : methods) {
    for (const EvalRow* row : by_method[m]) by_ctx.lines.push_back(fmt::format("{} {:.9g}", row->ctx, row->result.ppl));
    for (const EvalRow* row : by_method[m]) {
      if (row->ctx != max_ctx) continue;
      int i = 0;
      for (const BucketResult& b : row->result.buckets) by_bucket.lines.push_back(fmt::format("{} {:.9g}", i++, b.ppl));
    }
    for (GnuplotData* d : {&by_ctx, &by_bucket}) d->lines.insert(d->lines.end(), {"", ""});
  }
  std::string xtics;
  for (const EvalRow& row : report.rows) {
    if (row.ctx != max_ctx) continue;
    int i = 0;
    for (const BucketResult& b : row.result.buckets) {
      xtics += fmt::format("{}\"{}-{}\" {}", i == 0 ? "" : ", ", b.from, b.to, i);
      ++i;
    }
    break;
  }
  std::string plot_ctx, plot_bucket;
  for (size_t i = 0; i < methods.size(); ++i) {
    plot_ctx += fmt::format("{}$ppl_by_ctx index {} using 1:2 with linespoints lw 2 title {}", i ? ", " : "", i,
                            GnuplotQuote(methods[i]));
    plot_bucket += fmt::format("{}$ppl_by_bucket index {} using 1:2 with linespoints lw 2 title {}", i ? ", " : "",
                               i, GnuplotQuote(methods[i]));
  }
  const std::string body = fmt::format(
      "set termoption noenhanced\nset termoption font ',11'\n"
      "set multiplot layout 1,2 title {}\n"
      "set grid\nset key top left\nset logscale x 2\nset logscale y\n"
      "set xlabel 'context length L (tokens)'\nset ylabel 'perplexity'\n"
      "set title 'perplexity by context length'\n"
      "plot {}\n"
      "unset logscale x\nset xtics ({})\n"
      "set xlabel 'in-window position bucket (tokens)'\n"
      "set title 'perplexity by position at L = {}'\n"
      "plot {}\n"
      "unset multiplot",
      GnuplotQuote(fmt::format("{} on {} (trained at L0 = {})",
                               std::filesystem::path(report.model_path).filename().string(),
                               std::filesystem::path(report.text_path).filename().string(), report.config.train_ctx)),
      plot_ctx, xtics, max_ctx, plot_bucket);
  try {
    WriteGnuplotPng(png_path, 1400, 560, {by_ctx, by_bucket}, body);
  } catch (const IoError& e) {
    return {false, fmt::format("--plot: {} was not drawn: {}", png_path, e.what())};
  }
  return {true, fmt::format("wrote {}", png_path)};
}

}  // namespace posenc
