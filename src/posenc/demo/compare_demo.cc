#include "posenc/demo/compare_demo.h"

#include <fmt/format.h>

#include <algorithm>

#include "posenc/core/errors.h"
#include "posenc/demo/common.h"

namespace posenc::demo {

EvalOptions CompareDemoOptions(const std::string& model_path, const std::string& tokenizer_path,
                               const std::string& text_path, int threads, int64_t train_ctx) {
  CheckDemoTrainCtx(DemoTopic::kCompare, train_ctx);
  EvalOptions o;
  o.model_path = model_path;
  o.tokenizer_path = tokenizer_path;
  o.text_path = text_path;
  o.ctx = {train_ctx, 2 * train_ctx, 4 * train_ctx};
  o.methods = {RopeMethod::kNone, RopeMethod::kLinear, RopeMethod::kNtk, RopeMethod::kYarn, RopeMethod::kDynamic};
  const int64_t longest = 4 * train_ctx;
  o.n_pred = longest * ((kDemoPredictions + longest - 1) / longest);  // whole windows of every ctx
  o.threads = threads;
  return o;
}

CompareDemo RunCompareDemo(const EvalOptions& options) {
  CompareDemo demo;
  demo.ctx = options.ctx;
  demo.methods = options.methods;
  demo.report = RunEval(options);
  return demo;
}

std::string RenderCompareDemo(const CompareDemo& demo) {
  const EvalReport& r = demo.report;
  std::string out;
  out += "== compare: the extension methods, measured ==\n\n";
  out += fmt::format(
      "posenc eval on {} (trained at L0 = {} tokens), {} predictions per cell,\n"
      "non-overlapping windows, positions restarting at 0 in each window; s = ctx / L0.\n",
      ModelName(r.model_path), r.config.train_ctx, r.n_pred);
  if (!r.model_summary.empty()) out += fmt::format("  {}\n", r.model_summary);
  out += "\n";
  out += "perplexity (lower is better)\n";
  out += fmt::format("  {:<12}", "method");
  for (int64_t L : demo.ctx) out += fmt::format("  {:>10}", fmt::format("ctx {}", L));
  out += "\n";
  for (RopeMethod m : demo.methods) {
    out += fmt::format("  {:<12}", RopeMethodName(m));
    for (const EvalRow& row : r.rows) {
      if (row.method == m) out += fmt::format("  {:>10.4f}", row.result.ppl);
    }
    out += "\n";
  }
  const int64_t longest = *std::max_element(demo.ctx.begin(), demo.ctx.end());
  out += fmt::format("\nperplexity by in-window position at ctx {} (s = {})\n", longest,
                     static_cast<double>(longest) / static_cast<double>(r.config.train_ctx));
  bool header = false;
  for (RopeMethod m : demo.methods) {
    for (const EvalRow& row : r.rows) {
      if (row.method != m || row.ctx != longest) continue;
      if (!header) {
        out += fmt::format("  {:<12}", "method");
        for (const BucketResult& b : row.result.buckets)
          out += fmt::format("  {:>12}", fmt::format("[{},{})", b.from, b.to));
        out += "\n";
        header = true;
      }
      out += fmt::format("  {:<12}", RopeMethodName(m));
      for (const BucketResult& b : row.result.buckets) out += fmt::format("  {:>12.4f}", b.ppl);
      out += "\n";
    }
  }
  out += "\nWhat the numbers say:\n";
  for (int64_t L : demo.ctx) {
    const EvalRow* best = nullptr;
    const EvalRow* worst = nullptr;
    for (const EvalRow& row : r.rows) {
      if (row.ctx != L) continue;
      if (!best || row.result.ppl < best->result.ppl) best = &row;
      if (!worst || row.result.ppl > worst->result.ppl) worst = &row;
    }
    if (L <= r.config.train_ctx) {
      out += fmt::format("  ctx {:>5}: within training length every method is plain RoPE (s = 1): ppl {:.4f}\n", L,
                         best->result.ppl);
    } else {
      out += fmt::format("  ctx {:>5}: best {} ({:.4f}), worst {} ({:.4f})\n", L, RopeMethodName(best->method),
                         best->result.ppl, RopeMethodName(worst->method), worst->result.ppl);
    }
  }
  // the two observations the usual table gets wrong, read off the longest ctx
  const EvalRow* none = nullptr;
  const EvalRow* linear = nullptr;
  for (const EvalRow& row : r.rows) {
    if (row.ctx != longest) continue;
    if (row.method == RopeMethod::kNone) none = &row;
    if (row.method == RopeMethod::kLinear) linear = &row;
  }
  if (none && none->result.buckets.size() >= 3) {
    const BucketResult& first = none->result.buckets.front();
    const BucketResult& last = none->result.buckets.back();
    out += fmt::format("  none (unscaled) at ctx {}: ppl {:.4f} in [{},{}), {:.4f} in [{},{}): {:.2f}x.\n", longest,
                       first.ppl, first.from, first.to, last.ppl, last.from, last.to, last.ppl / first.ppl);
  }
  if (none && linear && !none->result.buckets.empty() && !linear->result.buckets.empty()) {
    const BucketResult& lf = linear->result.buckets.front();
    out += fmt::format(
        "  linear (PI) at ctx {}: ppl {:.4f} already in [{},{}), positions inside the training range,\n"
        "    against none's {:.4f} there: PI changes every position, near ones too.\n",
        longest, lf.ppl, lf.from, lf.to, none->result.buckets.front().ppl);
  }
  const LayerSpec* rope = PrimaryRopeLayer(r.config);
  const int64_t rotary = rope == nullptr ? 0
                         : rope->rope_params.rotary_dim > 0 ? rope->rope_params.rotary_dim
                                                            : r.config.head_dim;
  out += fmt::format(
      "  These are measurements without any fine-tuning, on one model (head_dim {}: {} frequency pairs);\n"
      "  `posenc eval` runs the full grid (more contexts, dynamic-hf, llama3, longrope).\n",
      r.config.head_dim, rotary / 2);
  return out;
}

}  // namespace posenc::demo
