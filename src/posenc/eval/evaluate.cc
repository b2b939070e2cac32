#include "posenc/eval/evaluate.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>
#include <omp.h>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/windows.h"
#include "posenc/model/tokenizer.h"
#include "posenc/model/transformer.h"

namespace posenc {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

EvalReport RunEval(const EvalOptions& options, const EvalProgress& progress) {
  if (options.ctx.empty()) throw ConfigError("ctx must list at least one context length, got none");
  if (options.methods.empty()) throw ConfigError("methods must list at least one method, got none");
  if (options.threads < 0) throw ConfigError(fmt::format("threads must be >= 0, got {}", options.threads));
  EvalReport report;
  report.model_path = options.model_path;
  report.tokenizer_path = options.tokenizer_path;
  report.text_path = options.text_path;
  report.n_pred = options.n_pred;
  report.threads = options.threads > 0 ? options.threads : omp_get_max_threads();

  // N against every ctx first (cheap); against the stream length once the text is tokenized.
  ValidateWindows(std::numeric_limits<int64_t>::max(), options.n_pred, options.ctx);
  const Transformer model(LoadCheckpoint(options.model_path));
  report.config = model.config();
  const Tokenizer tokenizer = Tokenizer::Load(options.tokenizer_path, report.config.vocab_size);

  const auto t_tok = std::chrono::steady_clock::now();
  const std::string text = ReadTextFile(options.text_path);
  if (text.empty()) throw IoError(fmt::format("text '{}' is empty (0 bytes): nothing to evaluate", options.text_path));
  const TokenStream stream = BuildTokenStream(text, tokenizer);
  report.tokenize_seconds = SecondsSince(t_tok);
  report.n_documents = stream.n_documents;
  report.stream_length = static_cast<int64_t>(stream.ids.size());
  report.first_ids.assign(stream.ids.begin(),
                          stream.ids.begin() + std::min<int64_t>(40, report.stream_length));
  ValidateWindows(report.stream_length, options.n_pred, options.ctx);
  // Method parameters are checked before any forward pass (BuildMethodRope is cheap at the smallest ctx).
  const int64_t ctx_min = *std::min_element(options.ctx.begin(), options.ctx.end());
  for (EvalMethod m : options.methods) BuildMethodRope(m, ctx_min, report.config, options.method_options);

  int64_t total_windows = 0;
  for (int64_t L : options.ctx) total_windows += static_cast<int64_t>(options.methods.size()) * (options.n_pred / L);
  int64_t done_before = 0;
  SetBlasThreads(1);  // parallelism is across windows
  const auto t_eval = std::chrono::steady_clock::now();
  for (int64_t L : options.ctx) {
    for (EvalMethod m : options.methods) {
      const auto t_row = std::chrono::steady_clock::now();
      const MethodRope rope = BuildMethodRope(m, L, report.config, options.method_options);
      std::function<void(int64_t, int64_t)> on_window;
      if (progress) on_window = [&](int64_t done, int64_t) { progress(done_before + done, total_windows); };
      const std::vector<double> nll =
          WindowedNll(model, stream.ids, options.n_pred, rope, report.threads, on_window);
      EvalRow row;
      row.ctx = L;
      row.method = m;
      row.factor = rope.factor;
      row.result = SummarizeNll(nll, L, report.config.seq_len);
      row.seconds = SecondsSince(t_row);
      report.rows.push_back(std::move(row));
      done_before += options.n_pred / L;
    }
  }
  report.eval_seconds = SecondsSince(t_eval);
  return report;
}

}  // namespace posenc
