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
  std::vector<EvalMethod> methods;
};

/// The demo's eval options: ctx {512, 1024, 2048} (L0 = 512: x1, x2, x4), methods none, linear, ntk, yarn,
/// dynamic, N = 16384 predictions (the protocol's default N, so each number is also in
/// the numpy oracle's tests/data/oracle_ppl.json), on the given files.
EvalOptions CompareDemoOptions(const std::string& model_path, const std::string& tokenizer_path,
                               const std::string& text_path, int threads);

/// Runs RunEval(options). Errors: as RunEval.
CompareDemo RunCompareDemo(const EvalOptions& options);

/// The demo as terminal text: ppl per (method, ctx), ppl per position bucket at the longest ctx, and what
/// the numbers say against the usual claims. No timings (they differ from run to run).
std::string RenderCompareDemo(const CompareDemo& demo);

}  // namespace posenc::demo
