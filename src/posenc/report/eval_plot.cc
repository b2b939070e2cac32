#include "posenc/report/eval_plot.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/report/gnuplot.h"

namespace posenc {

PlotOutcome PlotReport(const EvalReport& report, const std::string& png_path) {
  if (!GnuplotPath()) {
    return {false, fmt::format("plot {} was not drawn: {}; the results above are complete", png_path,
                               GnuplotMissingMessage())};
  }
  // Methods in first-seen order; per method: (ctx, ppl, 95% CI) and, at the largest ctx, its buckets. One data
  // block per panel, a method per index (blocks separated by two blank lines).
  std::vector<std::string> methods;
  std::map<std::string, std::vector<const EvalRow*>> by_method;
  int64_t min_ctx = 0, max_ctx = 0;
  for (const EvalRow& row : report.rows) {
    const std::string m(RopeMethodName(row.method));
    if (!by_method.count(m)) methods.push_back(m);
    by_method[m].push_back(&row);
    min_ctx = min_ctx == 0 ? row.ctx : std::min(min_ctx, row.ctx);
    max_ctx = std::max(max_ctx, row.ctx);
  }
  // The y range holds every point and CI bound (with a margin on the log axis); a bound that is not finite (one
  // unit: no CI) is drawn as the point itself.
  struct Range {
    double low = 0, high = 0;
    void Widen(double v) {
      if (!(std::isfinite(v) && v > 0)) return;
      low = low == 0 ? v : std::min(low, v);
      high = std::max(high, v);
    }
    // "[a:b]" with a margin of 6% of the span on the log axis.
    std::string Log() const {
      if (!(high > 0)) return "[*:*]";
      const double margin = high > low ? std::pow(high / low, 0.06) : 1.1;
      return fmt::format("[{:.9g}:{:.9g}]", low / margin, high * margin);
    }
  };
  Range ctx_range, bucket_range;
  int64_t n_buckets = 0;
  GnuplotData by_ctx{"ppl_by_ctx", {}}, by_bucket{"ppl_by_bucket", {}};
  const double n = static_cast<double>(methods.size());
  for (size_t i = 0; i < methods.size(); ++i) {
    // Methods side by side around each ctx (a few percent on the log axis) so that their CI bars do not cover
    // each other.
    const double dodge = std::pow(1.03, static_cast<double>(i) - (n - 1) / 2);
    for (const EvalRow* row : by_method[methods[i]]) {
      const double ppl = row->result.ppl;
      const double lo = std::isfinite(row->result.nll_ci95[0]) ? std::exp(row->result.nll_ci95[0]) : ppl;
      const double hi = std::isfinite(row->result.nll_ci95[1]) ? std::exp(row->result.nll_ci95[1]) : ppl;
      for (double v : {ppl, lo, hi}) ctx_range.Widen(v);
      by_ctx.lines.push_back(fmt::format("{:.9g} {:.9g} {:.9g} {:.9g}", static_cast<double>(row->ctx) * dodge, ppl,
                                         lo, hi));
    }
    for (const EvalRow* row : by_method[methods[i]]) {
      if (row->ctx != max_ctx) continue;
      int64_t b = 0;
      for (const BucketResult& r : row->result.buckets) {
        bucket_range.Widen(r.ppl);
        by_bucket.lines.push_back(fmt::format("{} {:.9g}", b++, r.ppl));
      }
      n_buckets = std::max(n_buckets, b);
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
  // Distinct colour, point type and dash per method (gnuplot's own sequences, stated so that they never repeat
  // within a plot of up to 15 methods).
  std::string plot_ctx, plot_bucket;
  for (size_t i = 0; i < methods.size(); ++i) {
    const std::string style = fmt::format("lc {} pt {} dt {} lw 2", i + 1, i % 14 + 1, i % 5 + 1);
    plot_ctx += fmt::format("{}$ppl_by_ctx index {} using 1:2:3:4 with yerrorlines {} title {}", i ? ", " : "", i,
                            style, GnuplotQuote(methods[i]));
    plot_bucket += fmt::format("{}$ppl_by_bucket index {} using 1:2 with linespoints {} title {}", i ? ", " : "", i,
                               style, GnuplotQuote(methods[i]));
  }
  const int64_t L0 = report.config.train_ctx;
  const double x_low = static_cast<double>(std::min(min_ctx, L0)) / 1.25;
  const double x_high = static_cast<double>(std::max(max_ctx, L0)) * 1.25;
  const std::string body = fmt::format(
      "set termoption noenhanced\nset termoption font ',11'\n"
      "set multiplot layout 1,2 title {}\n"
      "set grid\nset key top left\nset logscale x 2\nset logscale y 2\nset format y '%g'\n"
      "set xrange [{:.9g}:{:.9g}]\nset yrange {}\n"
      "set arrow 1 from {}, graph 0 to {}, graph 1 nohead dt 2 lw 2 lc rgb 'gray40'\n"
      "set label 1 'L0 = {}' at {}, graph 0.96 offset 1, 0 tc rgb 'gray40'\n"
      "set xlabel 'context length L (tokens)'\nset ylabel 'perplexity (bars: 95% CI)'\n"
      "set title 'perplexity by context length'\n"
      "plot {}\n"
      "unset arrow 1\nunset label 1\nunset logscale x\nset xrange [-0.3:{:.9g}]\nset yrange {}\n"
      "set xtics ({})\n"
      "set xlabel 'in-window position bucket (tokens)'\nset ylabel 'perplexity'\n"
      "set title 'perplexity by position at L = {}'\n"
      "plot {}\n"
      "unset multiplot",
      GnuplotQuote(fmt::format("{} on {} (trained at L0 = {}; {})",
                               std::filesystem::path(report.model_path).filename().string(),
                               std::filesystem::path(report.text_path).filename().string(), L0,
                               EvalProtocolName(report.protocol.protocol))),
      x_low, x_high, ctx_range.Log(), L0, L0, L0, L0, plot_ctx, static_cast<double>(n_buckets) - 0.7,
      bucket_range.Log(), xtics, max_ctx, plot_bucket);
  try {
    WriteGnuplotPng(png_path, 1400, 560, {by_ctx, by_bucket}, body);
  } catch (const IoError& e) {
    return {false, fmt::format("plot {} was not drawn: {}", png_path, e.what())};
  }
  return {true, fmt::format("wrote {}", png_path)};
}

}  // namespace posenc
