// `posenc demo compare`: the usual comparison table of context-extension methods, measured: a short
// `posenc eval` run (RunEval) of the bundled model at and past its training length.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/eval/evaluate.h"

namespace posenc::demo {

/// Everything `posenc demo compare` prints.
struct CompareDemo {
  EvalReport report;         // RunEval's result: rows ctx-major, methods in `methods` order
  std::vector<int64_t> ctx;  // window lengths, tokens
  std::vector<RopeMethod> methods;
};

/// Predictions per cell of the demo's table when the longest window is no longer (else one window of it).
inline constexpr int64_t kDemoPredictions = 4096;

/// The demo's eval options for a model trained at `train_ctx` = L0 tokens: ctx {L0, 2 L0, 4 L0} (s = 1, 2, 4;
/// the bundled model: 512, 1024, 2048), methods none, linear, ntk, yarn, dynamic, N = kDemoPredictions rounded up
/// to whole windows of 4 L0 (4096 for the bundled model), on the given files.
/// Errors: ConfigError naming the value if train_ctx is outside [1, 2^40].
EvalOptions CompareDemoOptions(const std::string& model_path, const std::string& tokenizer_path,
                               const std::string& text_path, int threads, int64_t train_ctx);

/// Runs RunEval(options). Errors: as RunEval.
CompareDemo RunCompareDemo(const EvalOptions& options);

/// The demo as terminal text: the model (the file name of the report's path, and its summary line), ppl per (method,
/// ctx), ppl per position bucket at the longest ctx, and what the numbers say against the usual claims, with the
/// model's head_dim and frequency pairs. No timings (they differ from run to run).
std::string RenderCompareDemo(const CompareDemo& demo);

}  // namespace posenc::demo
