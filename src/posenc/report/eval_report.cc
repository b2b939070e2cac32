#include "posenc/report/eval_report.h"

#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/eval/uncertainty.h"
#include "posenc/io/input_file.h"

namespace posenc {
namespace {

std::string FileName(const std::string& path) { return std::filesystem::path(path).filename().string(); }

std::string FormatFactor(double f) { return fmt::format("{:g}", f); }

nlohmann::json KlJson(const KlStats& k) {
  return {{"kl_mean", k.kl_mean}, {"kl_p99", k.kl_p99}, {"top1_agree", k.top1_agree}, {"dp_mean", k.dp_mean},
          {"tokens", k.count}};
}

KlStats KlFromJson(const nlohmann::json& j) {
  KlStats k;
  k.kl_mean = j.at("kl_mean").get<double>();
  k.kl_p99 = j.at("kl_p99").get<double>();
  k.top1_agree = j.at("top1_agree").get<double>();
  k.dp_mean = j.at("dp_mean").get<double>();
  k.count = j.at("tokens").get<int64_t>();
  return k;
}

// The JSON key of a row's parts: "windows", "documents" or "chunks".
std::string PartsKey(EvalProtocol p) { return std::string(PartKind(p)) + "s"; }

}  // namespace



std::string DescribeProtocol(const EvalReport& r) {
  const ProtocolOptions& p = r.protocol;
  std::string what;
  switch (p.protocol) {
    case EvalProtocol::kPosenc:
      what = "documents as one stream, non-overlapping windows of ctx, every position scored";
      break;
    case EvalProtocol::kSliding:
      what = fmt::format("per document, windows every {} tokens of [BOS] + ctx - 1 tokens, the tokens past the "
                         "previous window scored, mean over {}", p.stride, WindowAverageName(p.average));
      break;
    case EvalProtocol::kLlamaPerplexity:
      what = fmt::format("whole text, chunks of ctx (first token BOS), second half scored, {}",
                         p.chunks ? fmt::format("first {} chunks", *p.chunks)
                                  : (r.all_tokens ? std::string("every chunk") : "N / ctx chunks"));
      break;
    case EvalProtocol::kTruncate:
      what = "per document [BOS] + its first ctx - 1 tokens, all scored";
      break;
  }
  if (p.min_doc_tokens > 0 && (p.protocol == EvalProtocol::kSliding || p.protocol == EvalProtocol::kTruncate)) {
    what += fmt::format(", documents of >= {} tokens", p.min_doc_tokens);
  }
  return fmt::format("{} ({}; SE over {}s)", EvalProtocolName(p.protocol), what, UnitKind(p.protocol));
}

namespace {

// One column per bucket occurring at any row, in position order.
std::map<std::pair<int64_t, int64_t>, int> BucketColumns(const EvalReport& r) {
  std::map<std::pair<int64_t, int64_t>, int> columns;
  for (int64_t L : r.ctx) {
    for (const PositionBucket& b : PositionBuckets(L, r.config.train_ctx)) columns.emplace(std::make_pair(b.from, b.to), 0);
  }
  for (const EvalRow& row : r.rows) {
    for (const BucketResult& b : row.result.buckets) columns.emplace(std::make_pair(b.from, b.to), 0);
  }
  int k = 0;
  for (auto& [range, index] : columns) index = k++;
  return columns;
}

std::string FormatCi(const std::array<double, 2>& nll_ci) {
  if (!std::isfinite(nll_ci[0])) return "-";
  return fmt::format("[{:.4f}, {:.4f}]", std::exp(nll_ci[0]), std::exp(nll_ci[1]));
}

std::string FormatDiff(const EvalRow& row) {
  if (!row.diff) return "";
  const PairedDifference& d = *row.diff;
  if (d.diff.mean == 0.0 && d.diff.se == 0.0) return "0 (identical)";
  if (!std::isfinite(d.diff.se)) return fmt::format("{:+.4f}", d.diff.mean);
  return fmt::format("{:+.4f} ± {:.4f}{}", d.diff.mean, d.diff.t975 * d.diff.se, d.real ? " *" : "");
}

}  // namespace

std::string FormatMarkdownHeader(const EvalReport& r) {
  const ModelConfig& c = r.config;
  std::string out = fmt::format(
      "model: {} (dim {}, {} layers, {} heads / {} kv heads, head_dim {}, vocab {}, trained at L0 = {})\n"
      "text:  {}{}: {} documents, {} tokens (tokenized in {:.2f} s); {}\n"
      "protocol: {}\n\n",
      FileName(r.model_path), c.dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.train_ctx,
      r.text_path, r.text_part.empty() ? "" : ", " + r.text_part, r.n_documents, r.stream_length,
      r.tokenize_seconds,
      r.all_tokens ? std::string("N = the whole text") : fmt::format("N = {} tokens per row", r.n_pred),
      DescribeProtocol(r));
  const auto columns = BucketColumns(r);
  out += fmt::format("| ctx | method | factor | ppl | 95% CI | Δnll vs {} (95%) |",
                     r.baseline ? std::string(RopeMethodName(*r.baseline)) : std::string("-"));
  for (const auto& [range, index] : columns) out += fmt::format(" ppl {}-{} |", range.first, range.second);
  if (!r.kl_base.empty()) out += fmt::format(" KL vs {} | KL p99 | top-1 agree | Δp |", r.kl_base);
  out += " tokens | tokens/s |\n|---:|---|---:|---:|---|---:|";
  if (!r.kl_base.empty()) out += "---:|---:|---:|---:|";
  for (size_t i = 0; i < columns.size(); ++i) out += "---:|";
  out += "---:|---:|\n";
  return out;
}

std::string FormatMarkdownRow(const EvalReport& r, size_t i) {
  const EvalRow& row = r.rows.at(i);
  const auto columns = BucketColumns(r);
  std::vector<std::string> cells(columns.size());
  for (const BucketResult& b : row.result.buckets) {
    cells[static_cast<size_t>(columns.at({b.from, b.to}))] = fmt::format("{:.4f}", b.ppl);
  }
  std::string out = fmt::format("| {} | {} | {} | {:.4f} | {} | {} |", row.ctx, RopeMethodName(row.method),
                                FormatFactor(row.factor), row.result.ppl, FormatCi(row.result.nll_ci95),
                                FormatDiff(row));
  for (const std::string& cell : cells) out += " " + cell + " |";
  if (!r.kl_base.empty()) {
    if (row.kl) {
      out += fmt::format(" {:.3g} | {:.3g} | {:.4f} | {:+.4f} |", row.kl->kl_mean, row.kl->kl_p99, row.kl->top1_agree,
                         row.kl->dp_mean);
    } else {
      out += " | | | |";
    }
  }
  if (row.same_as >= 0) {
    out += fmt::format(" {} | = {} |\n", row.result.count, RopeMethodName(r.rows[static_cast<size_t>(row.same_as)].method));
  } else {
    out += row.seconds > 0 ? fmt::format(" {} | {:.0f} |\n", row.result.count,
                                         static_cast<double>(row.result.count) / row.seconds)
                           : fmt::format(" {} | resumed |\n", row.result.count);
  }
  return out;
}

std::string FormatMarkdownFooter(const EvalReport& r) {
  std::string out;
  std::string mapped;
  for (const EvalRow& row : r.rows) {
    if (row.parameters.empty()) continue;
    mapped += fmt::format("{}{} {}: {}", mapped.empty() ? "" : "; ", row.ctx, RopeMethodName(row.method),
                          row.parameters);
  }
  if (!mapped.empty()) out += fmt::format("\nposition maps (over the file's own RoPE): {}\n", mapped);
  std::string reused;
  for (const EvalRow& row : r.rows) {
    if (row.same_as < 0) continue;
    reused += fmt::format("{}{} {}", reused.empty() ? "" : ", ", row.ctx, RopeMethodName(row.method));
  }
  if (!reused.empty()) {
    out += fmt::format("\nreused rows (RoPE table, attention scale and pre-rotation identical bit for bit to the row "
                       "named in tokens/s, checked at run time; a run that reuses none computes them): {}\n", reused);
  }
  if (r.baseline) {
    std::string real, noise;
    for (const EvalRow& row : r.rows) {
      if (!row.diff || (row.same_as >= 0 && row.diff->diff.mean == 0.0)) continue;  // identical to the base
      const std::string item = fmt::format("{} {} ({:+.4f}, t = {:.2f})", row.ctx, RopeMethodName(row.method),
                                           row.diff->diff.mean, row.diff->t);
      std::string& list = row.diff->real ? real : noise;
      list += (list.empty() ? "" : ", ") + item;
    }
    if (!real.empty() || !noise.empty()) {
      out += fmt::format("\npaired Δnll against {} over the same {}s (* in the table: the 95% CI excludes 0): "
                         "real: {}; within noise: {}\n", RopeMethodName(*r.baseline), UnitKind(r.protocol.protocol),
                         real.empty() ? "none" : real, noise.empty() ? "none" : noise);
    }
  }
  int64_t tokens = 0, computed = 0;
  for (const EvalRow& row : r.rows) {
    tokens += row.result.count;
    if (row.same_as < 0) computed += row.result.count;
  }
  const std::string where =
      r.ranks == 1 && !r.context_parallel
          ? fmt::format("{} thread{}", r.threads, r.threads == 1 ? "" : "s")
          : fmt::format("{} ranks, {}", r.ranks,
                        r.context_parallel
                            ? fmt::format("context-parallel, {} split", ContextSplitName(r.context_split))
                            : fmt::format("data-parallel, {} thread{} per rank", r.threads,
                                          r.threads == 1 ? "" : "s"));
  out += fmt::format("\n{} row{}, {} tokens scored ({} computed) in {:.2f} s: {:.0f} tokens/s ({})\n",
                     r.rows.size(), r.rows.size() == 1 ? "" : "s", tokens, computed, r.eval_seconds,
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

std::string FormatMarkdown(const EvalReport& r) {
  std::string out = FormatMarkdownHeader(r);
  for (size_t i = 0; i < r.rows.size(); ++i) out += FormatMarkdownRow(r, i);
  return out + FormatMarkdownFooter(r);
}

nlohmann::json YarnParametersJson(const YarnOptions& y) {
  nlohmann::json j = nlohmann::json::object();
  if (y.beta_fast) j["beta_fast"] = *y.beta_fast;
  if (y.beta_slow) j["beta_slow"] = *y.beta_slow;
  if (y.mscale) j["mscale"] = *y.mscale;
  if (y.mscale_all_dim) j["mscale_all_dim"] = *y.mscale_all_dim;
  if (y.attention_factor) j["attention_factor"] = *y.attention_factor;
  if (y.no_truncate) j["truncate"] = false;
  return j;
}

nlohmann::json UserRopeParametersJson(const RopeParams& p) {
  nlohmann::json j = nlohmann::json::object();
  if (p.factor) j["factor"] = *p.factor;
  if (p.original_max_position_embeddings) j["original_max_position_embeddings"] = *p.original_max_position_embeddings;
  if (p.max_position_embeddings > 0) j["max_position_embeddings"] = p.max_position_embeddings;
  if (p.low_freq_factor) j["low_freq_factor"] = *p.low_freq_factor;
  if (p.high_freq_factor) j["high_freq_factor"] = *p.high_freq_factor;
  if (!p.short_factor.empty()) j["short_factor"] = p.short_factor;
  if (!p.long_factor.empty()) j["long_factor"] = p.long_factor;
  if (p.attention_factor) j["attention_factor"] = *p.attention_factor;
  return j;
}

nlohmann::json ToJson(const EvalReport& r) {
  nlohmann::json results = nlohmann::json::array();
  auto number = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  for (const EvalRow& row : r.rows) {
    nlohmann::json buckets = nlohmann::json::array();
    for (const BucketResult& b : row.result.buckets) {
      buckets.push_back({{"from", b.from}, {"to", b.to}, {"ppl", b.ppl}, {"nll_mean", b.mean_nll}, {"tokens", b.count}});
    }
    nlohmann::json parts = nlohmann::json::array();
    for (const PartResult& p : row.result.parts) {
      nlohmann::json part = {{"index", p.index}, {"tokens", p.count}, {"nll_mean", p.mean_nll}};
      if (r.protocol.protocol == EvalProtocol::kLlamaPerplexity) part["running_ppl"] = p.running_ppl;
      parts.push_back(part);
    }
    const std::array<double, 2>& ci = row.result.nll_ci95;
    nlohmann::json j = {{"ctx", row.ctx},
                        {"method", std::string(RopeMethodName(row.method))},
                        {"factor", row.factor},
                        {"ppl", row.result.ppl},
                        {"mean_nll", row.result.mean_nll},
                        {"nll_mean", row.result.mean_nll},
                        {"nll_se", number(row.result.nll_se)},
                        {"n_units", row.result.n_units},
                        {"tokens", row.result.count},
                        {"ci95", {number(std::exp(ci[0])), number(std::exp(ci[1]))}},
                        {"buckets", buckets},
                        {PartsKey(r.protocol.protocol), parts},
                        {"unit_nll", row.result.unit_nll}};
    if (row.same_as >= 0) j["same_as"] = row.same_as;
    if (!row.parameters.empty()) j["parameters"] = row.parameters;
    if (row.kl) {
      nlohmann::json kl = KlJson(*row.kl);
      kl["buckets"] = nlohmann::json::array();
      for (const auto& [b, st] : row.kl_buckets) {
        nlohmann::json e = KlJson(st);
        e["from"] = b.from;
        e["to"] = b.to;
        kl["buckets"].push_back(e);
      }
      j["kl"] = kl;
    }
    if (r.protocol.protocol == EvalProtocol::kLlamaPerplexity) j["pm"] = number(row.result.ppl * row.result.nll_se);
    if (row.diff) {
      const PairedDifference& d = *row.diff;
      j["diff_nll_mean"] = d.diff.mean;
      j["diff_nll_se"] = number(d.diff.se);
      j["diff_t"] = number(d.t);
      j["diff_ci95"] = {number(d.diff.ci95[0]), number(d.diff.ci95[1])};
      j["diff_real"] = d.real;
    }
    results.push_back(std::move(j));
  }
  nlohmann::json protocol = {{"name", std::string(EvalProtocolName(r.protocol.protocol))},
                             {"unit", std::string(UnitKind(r.protocol.protocol))},
                             {"description", DescribeProtocol(r)}};
  if (r.protocol.protocol == EvalProtocol::kSliding) {
    protocol["stride"] = r.protocol.stride;
    protocol["average"] = std::string(WindowAverageName(r.protocol.average));
  }
  if (r.protocol.protocol == EvalProtocol::kLlamaPerplexity && r.protocol.chunks) protocol["chunks"] = *r.protocol.chunks;
  if (r.protocol.protocol == EvalProtocol::kSliding || r.protocol.protocol == EvalProtocol::kTruncate) {
    protocol["min_doc_tokens"] = r.protocol.min_doc_tokens;
  }
  nlohmann::json out = {{"model", r.model_path},
          {"text", r.text_path},
          {"text_part", r.text_part.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.text_part)},
          {"tokens", r.all_tokens ? nlohmann::json("all") : nlohmann::json(r.n_pred)},
          {"protocol", protocol},
          {"baseline", r.baseline ? nlohmann::json(std::string(RopeMethodName(*r.baseline))) : nlohmann::json(nullptr)},
          {"kl_baseline", r.kl_base.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.kl_base)},
          {"stream_length", r.stream_length},
          {"first_ids", r.first_ids},
          {"add_bos", r.add_bos},
          {"parse_special", r.parse_special},
          {"model_notes", r.model_warnings},
          {"compute", {{"requested", std::string(ComputePathName(r.compute_requested))},
                       {"paths", r.compute_kinds},
                       {"kernels", r.compute}}},
          {"weights", std::string(WeightStorageName(r.weights))},
          {"results", results}};
  if (r.yarn.any()) out["yarn_parameters"] = YarnParametersJson(r.yarn);
  if (r.llama3) out["llama3_parameters"] = UserRopeParametersJson(*r.llama3);
  if (r.longrope) out["longrope_parameters"] = UserRopeParametersJson(*r.longrope);
  return out;
}

std::string FormatCsv(const EvalReport& r) {
  std::string out = "ctx,method,factor,scope,from,to,ppl,mean_nll,tokens\n";
  for (const EvalRow& row : r.rows) {
    const std::string_view m = RopeMethodName(row.method);
    out += fmt::format("{},{},{},all,0,{},{:.9g},{:.9g},{}\n", row.ctx, m, FormatFactor(row.factor), row.ctx,
                       row.result.ppl, row.result.mean_nll, row.result.count);
    for (const BucketResult& b : row.result.buckets) {
      out += fmt::format("{},{},{},bucket,{},{},{:.9g},{:.9g},{}\n", row.ctx, m, FormatFactor(row.factor), b.from,
                         b.to, b.ppl, b.mean_nll, b.count);
    }
  }
  return out;
}

ResumedRows ReadResumeRows(const std::string& json_path, const EvalOptions& options) {
  EvalReport expected;  // the keys this run will write
  expected.yarn = options.method_options.yarn;
  expected.llama3 = options.method_options.llama3;
  expected.longrope = options.method_options.longrope;
  if (options.training_record) {
    expected.text_part = RecordTextPart(*options.training_record, options.text_path, options.held_out_documents);
  }
  expected.model_path = options.model_path;
  expected.text_path = options.text_path;
  expected.n_pred = options.n_pred;
  expected.all_tokens = options.all_tokens;
  expected.protocol = options.protocol;
  expected.compute_requested = options.compute;
  expected.weights = options.weights;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(ReadRegularFile(json_path, "the file to resume"));
  } catch (const nlohmann::json::exception& e) {
    throw IoError(fmt::format("the file to resume, {}, is not a JSON file of posenc eval: {}", json_path, e.what()));
  }
  const nlohmann::json want = ToJson(expected);
  auto require_equal = [&](const nlohmann::json& a, const nlohmann::json& b, const std::string& key) {
    if (a != b) {
      throw ConfigError(fmt::format("the file to resume, {}: its {} is {}, this run's is {}: it is another run's file", json_path,
                                    key, a.dump(), b.dump()));
    }
  };
  try {
    for (const char* key : {"model", "text", "tokens"}) require_equal(j.at(key), want.at(key), key);
    for (const char* key : {"text_part", "yarn_parameters", "llama3_parameters", "longrope_parameters"}) {
      require_equal(j.value(key, nlohmann::json()), want.value(key, nlohmann::json()), key);
    }
    require_equal(j.at("protocol").at("description"), want.at("protocol").at("description"), "protocol");
    // The arithmetic: the compute path asked for and the weights' storage here; the paths the matrices took (which
    // `auto` resolves per CPU), recorded once for the file, are checked against the loaded model's by RunEval.
    const nlohmann::json compute = j.value("compute", nlohmann::json());
    require_equal(compute.is_object() ? compute.value("requested", nlohmann::json()) : nlohmann::json(),
                  want.at("compute").at("requested"), "compute");
    require_equal(j.value("weights", nlohmann::json()), want.at("weights"), "weights");
    const std::string parts_key = PartsKey(expected.protocol.protocol);
    ResumedRows resumed;
    resumed.compute_kinds = compute.at("paths").get<std::string>();
    std::vector<EvalRow>& rows = resumed.rows;
    for (const nlohmann::json& r : j.at("results")) {
      EvalRow row;
      row.ctx = r.at("ctx").get<int64_t>();
      row.method = ParseRopeMethod(r.at("method").get<std::string>());
      row.factor = r.at("factor").get<double>();
      if (r.contains("same_as")) row.same_as = r.at("same_as").get<int64_t>();
      if (r.contains("parameters")) row.parameters = r.at("parameters").get<std::string>();
      PerplexityResult& res = row.result;
      res.ppl = r.at("ppl").get<double>();
      res.mean_nll = r.at("nll_mean").get<double>();
      res.count = r.at("tokens").get<int64_t>();
      for (const nlohmann::json& b : r.at("buckets")) {
        res.buckets.push_back({b.at("from").get<int64_t>(), b.at("to").get<int64_t>(), b.at("tokens").get<int64_t>(),
                               b.at("nll_mean").get<double>(), b.at("ppl").get<double>()});
      }
      for (const nlohmann::json& p : r.at(parts_key)) {
        PartResult part;
        part.index = p.at("index").get<int64_t>();
        part.count = p.at("tokens").get<int64_t>();
        part.mean_nll = p.at("nll_mean").get<double>();
        if (p.contains("running_ppl")) part.running_ppl = p.at("running_ppl").get<double>();
        res.parts.push_back(part);
      }
      res.unit_nll = r.at("unit_nll").get<std::vector<double>>();
      if (r.contains("kl")) {
        row.kl = KlFromJson(r.at("kl"));
        for (const nlohmann::json& b : r.at("kl").at("buckets")) {
          row.kl_buckets.emplace_back(PositionBucket{b.at("from").get<int64_t>(), b.at("to").get<int64_t>()},
                                      KlFromJson(b));
        }
      }
      const MeanEstimate e = EstimateMean(res.unit_nll, res.mean_nll);
      res.n_units = e.n;
      res.nll_se = e.se;
      res.nll_ci95 = e.ci95;
      rows.push_back(std::move(row));
    }
    return resumed;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("the file to resume, {}: a key posenc eval writes is missing or of the wrong type: {}",
                                  json_path, e.what()));
  }
}

}  // namespace posenc
