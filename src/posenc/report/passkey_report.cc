#include "posenc/report/passkey_report.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/report/eval_report.h"
#include "posenc/report/gnuplot.h"

namespace posenc {

std::string FormatPasskeyHeader(const PasskeyReport& report) {
  std::string head = "| length | method | factor |", rule = "|---:|---|---:|";
  for (double d : report.depths) {
    head += fmt::format(" depth {:g} |", d);
    rule += "---:|";
  }
  return head + " accuracy |\n" + rule + "---:|\n";
}

std::string FormatPasskeyLines(const PasskeyReport& report, size_t first, size_t count) {
  if (count == 0) return "";
  const PasskeyRow& r0 = report.rows[first];
  std::string line = fmt::format("| {} | {} | {:.4g} |", r0.length, RopeMethodName(r0.method), r0.factor);
  int64_t correct = 0, trials = 0;
  for (size_t i = first; i < first + count; ++i) {
    const PasskeyRow& r = report.rows[i];
    line += fmt::format(" {}/{} |", r.correct, r.trials);
    correct += r.correct;
    trials += r.trials;
  }
  return line + fmt::format(" {:.3f} |\n", trials > 0 ? static_cast<double>(correct) / static_cast<double>(trials) : 0.0);
}

std::string FormatPasskeyFooter(const PasskeyReport& report) {
  std::string out;
  for (size_t i = 0; i < report.rows.size(); ++i) {
    const PasskeyRow& r = report.rows[i];
    const bool first_of_block = i == 0 || report.rows[i - 1].length != r.length || report.rows[i - 1].method != r.method;
    if (first_of_block && !r.parameters.empty()) {
      out += fmt::format("{} at {}: {}\n", RopeMethodName(r.method), r.length, r.parameters);
    }
  }
  return out;
}

nlohmann::json PasskeyJson(const PasskeyReport& report) {
  nlohmann::json j;
  j["model"] = report.model_path;
  j["tokenizer"] = report.tokenizer_path;
  j["model_summary"] = report.model_summary;
  j["compute"] = {{"paths", report.compute_kinds}, {"kernels", report.compute}};
  j["model_notes"] = report.model_warnings;
  j["train_ctx"] = report.config.train_ctx;
  j["add_bos"] = report.add_bos;
  j["seed"] = report.seed;
  j["max_new_tokens"] = report.max_new_tokens;
  j["threads"] = report.threads;
  j["lengths"] = report.lengths;
  j["depths"] = report.depths;
  std::vector<std::string> methods;
  for (RopeMethod m : report.methods) methods.emplace_back(RopeMethodName(m));
  j["methods"] = methods;
  j["keys"] = report.keys;
  j["complete"] = report.complete;
  if (report.yarn.any()) j["yarn_parameters"] = YarnParametersJson(report.yarn);
  j["rows"] = nlohmann::json::array();
  for (const PasskeyRow& r : report.rows) {
    nlohmann::json row = {{"length", r.length},   {"depth", r.depth},       {"method", RopeMethodName(r.method)},
                          {"factor", r.factor},   {"parameters", r.parameters}, {"trials", r.trials},
                          {"correct", r.correct}, {"accuracy", r.accuracy}, {"seconds", r.seconds},
                          {"forwards", r.forwards}};
    row["results"] = nlohmann::json::array();
    for (const PasskeyTrial& t : r.results) {
      row["results"].push_back({{"key", t.key},
                                {"prompt_tokens", t.prompt_tokens},
                                {"filler_chars", t.filler_chars},
                                {"prefix_chars", t.prefix_chars},
                                {"response", t.response},
                                {"answer", t.answer ? nlohmann::json(*t.answer) : nlohmann::json(nullptr)},
                                {"correct", t.correct}});
    }
    j["rows"].push_back(std::move(row));
  }
  return j;
}

PlotOutcome PlotPasskey(const PasskeyReport& report, const std::string& png_path) {
  if (!GnuplotPath()) {
    return {false, fmt::format("plot {} was not drawn: {}; the results above are complete", png_path,
                               GnuplotMissingMessage())};
  }
  // One data block index per method: "length_index depth_index accuracy" on a regular grid (with image).
  GnuplotData grid{"accuracy", {}};
  const auto index_of = [](const auto& v, const auto& x) {
    return static_cast<int>(std::find(v.begin(), v.end(), x) - v.begin());
  };
  for (RopeMethod m : report.methods) {
    for (const PasskeyRow& r : report.rows) {
      if (r.method != m) continue;
      grid.lines.push_back(fmt::format("{} {} {:.6g}", index_of(report.lengths, r.length),
                                       index_of(report.depths, r.depth), r.accuracy));
    }
    grid.lines.insert(grid.lines.end(), {"", ""});
  }
  std::string xtics, ytics;
  for (size_t i = 0; i < report.lengths.size(); ++i) xtics += fmt::format("{}\"{}\" {}", i ? ", " : "", report.lengths[i], i);
  for (size_t i = 0; i < report.depths.size(); ++i) ytics += fmt::format("{}\"{:g}\" {}", i ? ", " : "", report.depths[i], i);
  std::string panels;
  for (size_t i = 0; i < report.methods.size(); ++i) {
    panels += fmt::format("set title {}\nplot $accuracy index {} using 1:2:3 with image notitle\n",
                          GnuplotQuote(std::string(RopeMethodName(report.methods[i]))), i);
  }
  const int n = static_cast<int>(report.methods.size());
  const std::string body = fmt::format(
      "set termoption noenhanced\nset termoption font ',11'\n"
      "set multiplot layout 1,{} title {}\n"
      "set cbrange [0:1]\nset cblabel 'accuracy'\nset palette defined (0 '#b2182b', 0.5 '#f7f7f7', 1 '#2166ac')\n"
      "set xrange [-0.5:{}]\nset yrange [-0.5:{}]\nset xtics ({})\nset ytics ({})\n"
      "set xlabel 'length (tokens)'\nset ylabel 'depth of the key'\n"
      "{}unset multiplot",
      n,
      GnuplotQuote(fmt::format("passkey retrieval: {} (trained at L0 = {}), {} trials per cell",
                               std::filesystem::path(report.model_path).filename().string(),
                               report.config.train_ctx, report.keys.size())),
      static_cast<double>(report.lengths.size()) - 0.5, static_cast<double>(report.depths.size()) - 0.5, xtics,
      ytics, panels);
  try {
    WriteGnuplotPng(png_path, std::max(480, 420 * n), 460, {grid}, body);
  } catch (const IoError& e) {
    return {false, fmt::format("plot {} was not drawn: {}", png_path, e.what())};
  }
  return {true, fmt::format("wrote {}", png_path)};
}

}  // namespace posenc
