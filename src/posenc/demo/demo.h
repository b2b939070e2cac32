// `posenc demo`: one call per topic that computes the topic's numbers, renders them as terminal text and,
// when asked, writes its plots. The CLI (cli/cmd_demo.cc) only binds flags and prints what this returns.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "posenc/demo/common.h"

namespace posenc::demo {

/// Inputs of the demo topics that read files (position-blind, compare, finetune) and the plot switch.
struct DemoOptions {
  std::string model_path;      // the bundled data/stories260K.bin, or any model file (position-blind: llama2.c)
  std::string tokenizer_path;  // the bundled data/tok512.bin; empty: the model's own (compare, finetune)
  std::string text_path;                          // eval text for `compare` (data/text/tinystories_val_stories.txt)
  std::optional<std::filesystem::path> plot_dir;  // write PNGs here (must exist; see EnsurePlotDir)
  int threads = 0;                                // compare: OpenMP threads, 0 = all (results do not depend on it)
  std::function<void(const std::string& line)> progress;  // finetune: a line per method and every 5 steps
};

/// What one topic produced.
struct DemoOutput {
  std::string text;                          // terminal text, ends with a newline
  std::vector<std::filesystem::path> plots;  // PNGs written (empty without plot_dir, or for a topic
                                             // without plots)
};

/// The names of the PNG files RunDemo writes into options.plot_dir for `topic` (empty for a topic without
/// plots), so a caller can check them against its inputs before running. Errors: none.
std::vector<std::string> DemoPlotFiles(DemoTopic topic);

/// Runs one topic. Plots are written only when options.plot_dir is set (the caller checks GnuplotPath()
/// first and says so when gnuplot is missing).
/// Errors: posenc::IoError if a model, tokenizer or text file cannot be read, or gnuplot fails; everything
///         the topic's library calls throw (none for valid bundled data).
DemoOutput RunDemo(DemoTopic topic, const DemoOptions& options);

}  // namespace posenc::demo
