// What `posenc passkey` prints and writes: the accuracy table, the JSON report and the heat-map PNG.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/eval/passkey.h"
#include "posenc/report/eval_plot.h"

namespace posenc {

/// The table's header: one column per depth and the mean over depths. Markdown, ending in "\n".
std::string FormatPasskeyHeader(const PasskeyReport& report);

/// The table lines of rows [first, first + count) (one (length, method) block: a line per block with the
/// accuracy at each depth as correct/trials and the mean accuracy over its depths). The rows must be the
/// block's depths in report.depths order. Errors: none.
std::string FormatPasskeyLines(const PasskeyReport& report, size_t first, size_t count);

/// The lines after the table: each position-map method's parameters as used at each length ("self-extend at
/// 1024: ..."), one per line; empty when no row has a position map.
std::string FormatPasskeyFooter(const PasskeyReport& report);

/// The JSON report: model, tokenizer, L0, seed, max_new_tokens, lengths, depths, methods, keys, complete,
/// "yarn_parameters" when any is set (YarnParametersJson), and `rows`, each with length, depth, method, factor,
/// parameters, trials, correct, accuracy, seconds, forwards and `results` (per trial: key, prompt_tokens, filler_chars, prefix_chars, response, answer (null when the
/// response has no digit), correct). Strings that are not UTF-8 (paths, responses) are written with U+FFFD.
nlohmann::json PasskeyJson(const PasskeyReport& report);

/// A heat-map PNG (gnuplot): accuracy by length (x) and depth (y), one panel per method. When gnuplot is
/// missing or fails, says so in the outcome instead of throwing (the table and JSON are complete without it).
PlotOutcome PlotPasskey(const PasskeyReport& report, const std::string& png_path);

}  // namespace posenc
