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

/// Draws two panels into a PNG: ppl against ctx (log-log, one line per method) and the per-bucket ppl at
/// the largest ctx (one line per method). Runs the first `gnuplot` on PATH on a script and data files in a
/// temporary directory (removed afterwards); uses the pngcairo terminal.
/// Errors: none thrown for gnuplot trouble (see PlotOutcome); IoError if the temporary files cannot be
/// written.
PlotOutcome PlotReport(const EvalReport& report, const std::string& png_path);

/// Full path of an executable `name` found on PATH, or "" if there is none.
std::string FindOnPath(const std::string& name);

}  // namespace posenc
