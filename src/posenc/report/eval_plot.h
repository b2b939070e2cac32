// `posenc eval --plot F.png`: perplexity against context length and by position bucket, drawn by gnuplot.
#pragma once

#include <string>

#include "posenc/eval/evaluate.h"

namespace posenc {

/// What became of a plot request. A missing or failing gnuplot is reported here, never thrown: the eval
/// results stand without their picture.
struct PlotOutcome {
  bool drawn = false;
  std::string message;  // what happened, for the user ("wrote F.png" or why not)
};

/// Draws two panels into a PNG (1400 x 560): ppl against ctx (log-log, one line per method, bars of each row's
/// 95% CI, the methods a few percent apart around each ctx so that bars stay apart, a dashed line at L0) and
/// the per-bucket ppl at the largest ctx (one line per method); a distinct colour, point type and dash per
/// method; the axes fitted to the points and bounds. Through WriteGnuplotPng (report/gnuplot.h: data inline,
/// the PNG written atomically).
/// Errors: none thrown for gnuplot trouble (see PlotOutcome: missing, failing, no PNG); nothing else.
PlotOutcome PlotReport(const EvalReport& report, const std::string& png_path);

}  // namespace posenc
