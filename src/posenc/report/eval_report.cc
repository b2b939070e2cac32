#include "posenc/report/eval_report.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

std::string FileName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string FormatFactor(double f) { return fmt::format("{:g}", f); }

}  // namespace

std::string FormatMarkdown(const EvalReport& r) {
  const ModelConfig& c = r.config;
  std::string out = fmt::format(
      "model: {} (dim {}, {} layers, {} heads / {} kv heads, head_dim {}, vocab {}, trained at L0 = {})\n"
      "text:  {}: {} documents, {} tokens (tokenized in {:.2f} s); N = {} predictions per row\n\n",
      FileName(r.model_path), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.train_ctx,
      r.text_path, r.n_documents, r.stream_length, r.tokenize_seconds, r.n_pred);
  // One column per bucket occurring at any ctx, in position order.
  std::map<std::pair<int64_t, int64_t>, int> columns;
  for (const EvalRow& row : r.rows) {
    for (const BucketResult& b : row.result.buckets) columns.emplace(std::make_pair(b.from, b.to), 0);
  }
  int k = 0;
  for (auto& [range, index] : columns) index = k++;
  out += "| ctx | method | factor | ppl |";
  for (const auto& [range, index] : columns) out += fmt::format(" ppl {}-{} |", range.first, range.second);
  out += " tokens | tokens/s |\n|---:|---|---:|---:|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---:|";
  out += "---:|---:|\n";
  for (const EvalRow& row : r.rows) {
    std::vector<std::string> cells(columns.size());
    for (const BucketResult& b : row.result.buckets) {
      cells[static_cast<size_t>(columns.at({b.from, b.to}))] = fmt::format("{:.4f}", b.ppl);
    }
    out += fmt::format("| {} | {} | {} | {:.4f} |", row.ctx, EvalMethodName(row.method), FormatFactor(row.factor),
                       row.result.ppl);
    for (const std::string& cell : cells) out += " " + cell + " |";
    if (row.same_as >= 0) {
      out += fmt::format(" {} | = {} |\n", row.result.count,
                         EvalMethodName(r.rows[static_cast<size_t>(row.same_as)].method));
    } else {
      out += fmt::format(" {} | {:.0f} |\n", row.result.count,
                         row.seconds > 0 ? static_cast<double>(row.result.count) / row.seconds : 0.0);
    }
  }
  std::string mapped;
  for (const EvalRow& row : r.rows) {
    if (row.parameters.empty()) continue;
    mapped += fmt::format("{}{} {}: {}", mapped.empty() ? "" : "; ", row.ctx, EvalMethodName(row.method),
                          row.parameters);
  }
  if (!mapped.empty()) out += fmt::format("\nposition maps (over the file's own RoPE): {}\n", mapped);
  std::string reused;
  for (const EvalRow& row : r.rows) {
    if (row.same_as < 0) continue;
    reused += fmt::format("{}{} {}", reused.empty() ? "" : ", ", row.ctx, EvalMethodName(row.method));
  }
  if (!reused.empty()) {
    out += fmt::format("\nreused rows (RoPE table, attention scale and pre-rotation identical bit for bit to the row "
                       "named in tokens/s, checked at run time; --no-reuse computes them): {}\n", reused);
  }
  int64_t tokens = 0, computed = 0;
  for (const EvalRow& row : r.rows) {
    tokens += row.result.count;
    if (row.same_as < 0) computed += row.result.count;
  }
  const std::string where =
      r.ranks == 1 && !r.context_parallel
          ? fmt::format("{} threads", r.threads)
          : fmt::format("{} ranks, {}", r.ranks,
                        r.context_parallel
                            ? fmt::format("context-parallel, {} split", ContextSplitName(r.context_split))
                            : fmt::format("data-parallel, {} threads per rank", r.threads));
  out += fmt::format("\n{} rows, {} tokens scored ({} computed) in {:.2f} s: {:.0f} tokens/s ({})\n",
                     r.rows.size(), tokens, computed, r.eval_seconds,
                     r.eval_seconds > 0 ? static_cast<double>(tokens) / r.eval_seconds : 0.0, where);
  if (r.context_parallel && r.context_parallel_stats.windows > 0) {
    const ContextParallelStats& st = r.context_parallel_stats;
    const double n = static_cast<double>(st.windows);
    const double hidden = st.ring.compute_s + st.ring.wait_s > 0
                              ? 100.0 * (1.0 - st.ring.wait_s / (st.ring.compute_s + st.ring.wait_s)) : 100.0;
    out += fmt::format("context parallel (rank 0): {:.1f} ms per window, K/V sent {} bytes per window, ring "
                       "attention {:.1f} ms per window of which {:.2f} ms waiting for transfers ({:.1f}% of "
                       "attention time not spent waiting)\n",
                       1e3 * st.seconds / n, static_cast<int64_t>(static_cast<double>(st.ring.bytes_sent) / n),
                       1e3 * st.ring.total_s / n, 1e3 * st.ring.wait_s / n, hidden);
  }
  return out;
}

nlohmann::json ToJson(const EvalReport& r) {
  nlohmann::json results = nlohmann::json::array();
  for (const EvalRow& row : r.rows) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const BucketResult& b : row.result.buckets) buckets.push_back({{"from", b.from}, {"to", b.to}, {"ppl", b.ppl}});
    results.push_back({{"ctx", row.ctx},
                       {"method", std::string(EvalMethodName(row.method))},
                       {"factor", row.factor},
                       {"ppl", row.result.ppl},
                       {"mean_nll", row.result.mean_nll},
                       {"buckets", buckets}});
    if (!row.parameters.empty()) results.back()["parameters"] = row.parameters;
  }
  return {{"model", r.model_path},       {"text", r.text_path},           {"tokens", r.n_pred},
          {"stream_length", r.stream_length}, {"first_ids", r.first_ids}, {"add_bos", r.add_bos},
          {"model_notes", r.model_warnings}, {"results", results}};
}

std::string FormatCsv(const EvalReport& r) {
  std::string out = "ctx,method,factor,scope,from,to,ppl,mean_nll,tokens\n";
  for (const EvalRow& row : r.rows) {
    const std::string_view m = EvalMethodName(row.method);
    out += fmt::format("{},{},{},all,0,{},{:.9g},{:.9g},{}\n", row.ctx, m, FormatFactor(row.factor), row.ctx,
                       row.result.ppl, row.result.mean_nll, row.result.count);
    for (const BucketResult& b : row.result.buckets) {
      out += fmt::format("{},{},{},bucket,{},{},{:.9g},{:.9g},{}\n", row.ctx, m, FormatFactor(row.factor), b.from,
                         b.to, b.ppl, b.mean_nll, b.count);
    }
  }
  return out;
}

}  // namespace posenc
