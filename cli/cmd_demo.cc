// posenc demo [TOPIC] [--plot-dir DIR]: the classic explanations of positional encoding, computed by the
// library (src/posenc/demo/) and printed. No topic runs them all.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "posenc/demo/demo.h"
#include "posenc/report/gnuplot.h"
#include "posenc/core/threads.h"
#include "posenc/core/errors.h"
#include "posenc/eval/data_files.h"
#include "posenc/io/output_file.h"
#include "posenc/model/loader.h"

namespace posenc::cli {
namespace {

struct DemoArgs {
  std::string topic;
  std::optional<std::string> plot_dir;  // set (even to ""): plots were asked for
  std::string model;      // empty: the bundled data/stories260K.bin (FindDataFile)
  std::string tokenizer;  // empty: data/tok512.bin
  std::string text;       // empty: data/text/tinystories_val_stories.txt
  int threads = 0;
};

}  // namespace

void RegisterDemoCommand(CLI::App& app, CommandMode mode) {
  auto args = std::make_shared<DemoArgs>();
  std::vector<std::string> names;
  for (demo::DemoTopic t : demo::AllDemoTopics()) names.emplace_back(demo::DemoTopicName(t));
  CLI::App* cmd = app.add_subcommand(
      "demo", "Why transformers need positions, runnable: every number computed by posenc and checked");
  cmd->add_option("topic", args->topic, fmt::format("one of {} (default: all)", fmt::join(names, ", ")))
      ->check(CLI::IsMember(names));
  cmd->add_option("--plot-dir", args->plot_dir, "write the topics' PNG plots here (needs gnuplot)");
  cmd->add_option("--model", args->model,
                  "model for position-blind, compare and finetune: llama2.c .bin, GGUF or Hugging Face folder "
                  "(default: the bundled stories260K)");
  cmd->add_option("--tokenizer", args->tokenizer,
                  "tokenizer (default: the bundled tok512 for a llama2.c checkpoint, else the model's own)");
  cmd->add_option("--text", args->text, "eval text (compare, finetune; default: bundled TinyStories validation)");
  cmd->add_option("--threads", args->threads,
                  fmt::format("compare: OpenMP threads (0 = all; at most {})", kMaxThreads));
  cmd->callback([args, mode] {
    const std::vector<demo::DemoTopic> topics =
        args->topic.empty() ? demo::AllDemoTopics() : std::vector<demo::DemoTopic>{demo::ParseDemoTopic(args->topic)};
    demo::DemoOptions options{args->model, args->tokenizer, args->text, std::nullopt, args->threads, {}};
    ResolveThreads(options.threads, "--threads");
    if (mode == CommandMode::kParseOnly) return;
    options.progress = [](const std::string& line) {
      fmt::print(stderr, "finetune demo: {}\n", line);
      std::fflush(stderr);
    };
    const bool needs_model = std::any_of(topics.begin(), topics.end(), [](demo::DemoTopic t) {
      return t == demo::DemoTopic::kPositionBlind || t == demo::DemoTopic::kCompare ||
             t == demo::DemoTopic::kFinetune;
    });
    if (needs_model) {  // the bundled files, found as `posenc eval` finds them
      const std::vector<std::string> dirs = DefaultDataDirs(POSENC_DATA_DIR);
      if (options.model_path.empty()) options.model_path = FindDataFile("stories260K.bin", dirs);
      // A llama2.c checkpoint holds no vocabulary: the bundled tok512 goes with it; any other model has its own.
      if (options.tokenizer_path.empty() && DetectModelFormat(options.model_path) == ModelFormat::kLlama2c) {
        options.tokenizer_path = FindDataFile("tok512.bin", dirs);
      }
      if (options.text_path.empty()) options.text_path = FindDataFile("text/tinystories_val_stories.txt", dirs);
    }
    bool gnuplot_missing = false;
    if (args->plot_dir) {
      if (args->plot_dir->empty()) throw IoError("--plot-dir: the output path is empty");
      if (GnuplotPath()) {
        EnsurePlotDir(*args->plot_dir);
        options.plot_dir = *args->plot_dir;
        std::vector<RunPath> pngs;
        for (demo::DemoTopic t : topics) {
          for (const std::string& name : demo::DemoPlotFiles(t)) {
            pngs.push_back({"--plot-dir", (std::filesystem::path(*args->plot_dir) / name).string()});
          }
        }
        CheckRunPaths(std::vector<RunPath>{{"--model", options.model_path}, {"--tokenizer", options.tokenizer_path},
                                           {"--text", options.text_path}},
                      pngs);
      } else {
        gnuplot_missing = true;
      }
    }
    for (size_t i = 0; i < topics.size(); ++i) {
      const demo::DemoOutput out = demo::RunDemo(topics[i], options);
      fmt::print("{}{}", i ? "\n" : "", out.text);
      for (const auto& png : out.plots) fmt::print("plot written: {}\n", png.string());
      std::fflush(stdout);
    }
    if (gnuplot_missing) fmt::print(stderr, "note: {}\n", GnuplotMissingMessage());
  });
}

}  // namespace posenc::cli
