// EvalReport -> markdown table, JSON, CSV.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/eval/evaluate.h"

namespace posenc {

/// The protocol in words, as the table's header and the JSON name it ("sliding (per document, windows every 256
/// tokens ...; SE over documents)").
std::string DescribeProtocol(const EvalReport& report);

/// A short header (model, text, stream, N, protocol), then a markdown table with one row per (ctx, method):
/// factor, ppl, its 95% CI (exp of the NLL interval), the paired difference in mean NLL against the baseline
/// (mean -/+ half-width of its 95% CI, "*" when the interval excludes 0), ppl of every position bucket, with a KL
/// base the KL mean, its 99th percentile, top-1 agreement and mean Δp of the correct token (a column
/// per bucket of PositionBuckets at any ctx; empty where none is scored), tokens scored and tokens per second of
/// that row; then the reused rows, a line naming the real differences and those within noise, and a total line.
/// ppl values are printed with 4 decimals (as the oracle's table), tokens/s rounded. A reused row (same_as)
/// shows "= <method>" instead of tokens/s. FormatMarkdown = header + every row + footer; the parts serve a
/// streaming run (FormatMarkdownRow as each row finishes).
std::string FormatMarkdown(const EvalReport& report);
std::string FormatMarkdownHeader(const EvalReport& report);
std::string FormatMarkdownRow(const EvalReport& report, size_t row);
std::string FormatMarkdownFooter(const EvalReport& report);

/// JSON object: "model", "text", "text_part" (EvalReport::text_part, or null), "tokens" (N, or "all"), "protocol" {"name", "unit", "description", and its
/// parameters: "stride", "average" (sliding), "chunks" (llama-perplexity, when given), "min_doc_tokens" (sliding,
/// truncate)}, "baseline" (method or null), "kl_baseline" (method, file or null), "stream_length" (tokens of every sequence the protocol read),
/// "first_ids" (first 40 ids), "yarn_parameters" (YarnParametersJson, only when any is set),
/// "llama3_parameters" / "longrope_parameters" (UserRopeParametersJson, when given) and "results": per row {"ctx", "method", "factor", "ppl", "mean_nll" (= "nll_mean"),
/// "nll_se", "n_units", "tokens", "ci95" ([low, high] in ppl), "buckets": [{"from", "to", "ppl", "tokens"}],
/// the parts ("windows", "documents" or "chunks": [{"index", "tokens", "nll_mean", "running_ppl" (chunks)}]),
/// "unit_nll" (the units' values), "same_as" (reused rows), "kl" (with a KL base: {"kl_mean",
/// "kl_p99", "top1_agree", "dp_mean", "tokens", "buckets": [{..., "from", "to"}]}), "pm" (llama-perplexity: ppl * nll_se,
/// llama.cpp's +-), and against the baseline "diff_nll_mean", "diff_nll_se", "diff_t", "diff_ci95" (in NLL),
/// "diff_real"}. Numbers at full double precision; an undefined SE or bound (one unit) is null.
nlohmann::json ToJson(const EvalReport& report);

/// The yarn parameters a run set (MethodOptions::yarn), keyed by their HF rope_scaling names (beta_fast,
/// beta_slow, mscale, mscale_all_dim, attention_factor, truncate: false); unset ones are left out. The eval and passkey JSON
/// write it as "yarn_parameters" when any is set.
nlohmann::json YarnParametersJson(const YarnOptions& yarn);

/// The llama3 or longrope parameters a run gave (MethodOptions::llama3 / longrope), keyed by their HF
/// rope_scaling names (factor, original_max_position_embeddings, low_freq_factor, high_freq_factor,
/// short_factor, long_factor, attention_factor, max_position_embeddings); unset ones are left out. The eval JSON
/// writes them as "llama3_parameters" / "longrope_parameters" when given.
nlohmann::json UserRopeParametersJson(const RopeParams& params);

/// CSV with a header line and columns ctx,method,factor,scope,from,to,ppl,mean_nll,tokens: one line with
/// scope "all" (from 0 to ctx) per row, then one line per position bucket (scope "bucket").
std::string FormatCsv(const EvalReport& report);

/// The rows of a JSON that ToJson wrote (an earlier, possibly interrupted run), for `--resume`: ctx, method,
/// factor, same_as (seconds 0: the table says "resumed") and the result (ppl, mean_nll, count, buckets, parts, unit_nll; nll_se and nll_ci95
/// recomputed from unit_nll by EstimateMean, the same function and bits as the run that wrote them). Numbers
/// round-trip exactly (the JSON holds every double at full precision).
/// The file must describe the run `options` asks for: "model", "text", "tokens", the protocol's "description",
/// the methods' parameters, the compute path asked for and the weights' storage equal, else ConfigError naming the
/// key and both values. The paths its matrices took (`compute.paths`) are returned for RunEval to check against the
/// loaded model's (EvalOptions::resume_compute_kinds).
/// Errors: IoError if the file cannot be read or parsed; ConfigError as above or for a row lacking a key.
struct ResumedRows {
  std::vector<EvalRow> rows;
  std::string compute_kinds;  // ComputeKinds of the run that wrote the file
};
ResumedRows ReadResumeRows(const std::string& json_path, const EvalOptions& options);

}  // namespace posenc
