// EvalReport -> markdown table, JSON, CSV.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "posenc/eval/evaluate.h"

namespace posenc {

/// A short header (model, text, stream, N), then a markdown table with one row per (ctx, method): factor,
/// ppl, ppl of every position bucket (a column per bucket that occurs at any ctx; empty where the bucket is
/// outside [0, ctx)), tokens scored and tokens per second of that row; then a total line.
/// ppl values are printed with 4 decimals (as the oracle's table), tokens/s rounded. A reused row (same_as)
/// shows "= <method>" instead of tokens/s, and a line after the table lists every reused row.
std::string FormatMarkdown(const EvalReport& report);

/// JSON object with exactly: "model", "text", "tokens" (N), "stream_length", "first_ids" (first 40 ids) and
/// "results": a list of {"ctx", "method", "factor", "ppl", "mean_nll", "buckets": [{"from", "to", "ppl"}]}.
/// Numbers are written at full double precision.
nlohmann::json ToJson(const EvalReport& report);

/// CSV with a header line and columns ctx,method,factor,scope,from,to,ppl,mean_nll,tokens: one line with
/// scope "all" (from 0 to ctx) per row, then one line per position bucket (scope "bucket").
std::string FormatCsv(const EvalReport& report);

}  // namespace posenc
