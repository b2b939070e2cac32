#include "posenc/eval/protocols.h"

#include <algorithm>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"

namespace posenc {
namespace {

constexpr EvalProtocol kProtocols[] = {EvalProtocol::kPosenc, EvalProtocol::kSliding, EvalProtocol::kLlamaPerplexity,
                                       EvalProtocol::kTruncate};

// Window [BOS] + seq[begin, end) (or seq[begin, end) alone without a BOS) scoring the targets of its last
// `n_scored` input tokens' successors: input position t predicts input[t + 1].
ProtocolWindow DocumentWindow(const std::vector<int>& seq, int64_t begin, int64_t end, int64_t first_scored_token,
                              int bos, int64_t unit) {
  ProtocolWindow w;
  w.unit = unit;
  if (bos >= 0) w.input.push_back(bos);
  w.input.insert(w.input.end(), seq.begin() + begin, seq.begin() + end);
  const int64_t offset = bos >= 0 ? 1 : 0;  // input index of seq[begin]
  // Token seq[j] sits at input index j - begin + offset and is predicted by the position before it.
  const int64_t first = std::max<int64_t>(first_scored_token, begin + (offset == 0 ? 1 : 0));
  w.score_from = first - begin + offset - 1;
  for (int64_t j = first; j < end; ++j) w.targets.push_back(seq[static_cast<size_t>(j)]);
  return w;
}

}  // namespace

std::string_view EvalProtocolName(EvalProtocol protocol) {
  switch (protocol) {
    case EvalProtocol::kPosenc: return "posenc";
    case EvalProtocol::kSliding: return "sliding";
    case EvalProtocol::kLlamaPerplexity: return "llama-perplexity";
    case EvalProtocol::kTruncate: return "truncate";
  }
  return "?";
}

EvalProtocol ParseEvalProtocol(std::string_view name) {
  for (EvalProtocol p : kProtocols) {
    if (EvalProtocolName(p) == name) return p;
  }
  throw ConfigError(fmt::format("unknown protocol '{}' (expected one of posenc, sliding, llama-perplexity, truncate)",
                                name));
}

std::string_view WindowAverageName(WindowAverage average) {
  return average == WindowAverage::kWindows ? "windows" : "tokens";
}

WindowAverage ParseWindowAverage(std::string_view name) {
  if (name == "windows") return WindowAverage::kWindows;
  if (name == "tokens") return WindowAverage::kTokens;
  throw ConfigError(fmt::format("unknown average '{}' (expected windows or tokens)", name));
}

std::string_view PartKind(EvalProtocol protocol) {
  switch (protocol) {
    case EvalProtocol::kPosenc: return "window";
    case EvalProtocol::kLlamaPerplexity: return "chunk";
    default: return "document";
  }
}

std::string_view UnitKind(EvalProtocol protocol) {
  switch (protocol) {
    case EvalProtocol::kPosenc: return "window";
    case EvalProtocol::kLlamaPerplexity: return "token";
    default: return "document";
  }
}

ProtocolTokens TokenizeForProtocol(std::string_view text, const Tokenizer& tokenizer, EvalProtocol protocol,
                                   std::optional<bool> add_bos) {
  ProtocolTokens t;
  t.protocol = protocol;
  const bool bos = add_bos.value_or(tokenizer.add_bos_default());
  if (bos && tokenizer.bos_id() < 0) {
    throw ConfigError("add_bos is set but the tokenizer has no BOS token");
  }
  t.bos = bos ? tokenizer.bos_id() : -1;
  t.n_documents = static_cast<int64_t>(SplitDocuments(text).size());
  switch (protocol) {
    case EvalProtocol::kPosenc:
      t.sequences.push_back(BuildTokenStream(text, tokenizer, bos).ids);
      break;
    case EvalProtocol::kLlamaPerplexity:
      t.sequences.push_back(tokenizer.Encode(text, t.bos >= 0, false));
      break;
    case EvalProtocol::kSliding:
    case EvalProtocol::kTruncate:
      t.sequences = EncodeDocuments(SplitDocuments(text), tokenizer, /*add_bos=*/false);
      break;
  }
  return t;
}

ProtocolPlan BuildProtocolPlan(const ProtocolTokens& tokens, int64_t ctx, const ProtocolOptions& o, int64_t n_pred,
                               bool all_tokens) {
  const EvalProtocol protocol = o.protocol;
  if (tokens.protocol != protocol) {
    throw ConfigError(fmt::format("tokens were read for protocol {}, not {}", EvalProtocolName(tokens.protocol),
                                  EvalProtocolName(protocol)));
  }
  if (ctx < 2) throw ConfigError(fmt::format("`ctx` must be >= 2 tokens, got {}", ctx));
  if (!all_tokens && n_pred <= 0) throw ConfigError(fmt::format("`n_pred` must be > 0 tokens, got {}", n_pred));
  if (o.stride < 1) throw ConfigError(fmt::format("`stride` must be >= 1, got {}", o.stride));
  if (o.min_doc_tokens < 0) {
    throw ConfigError(fmt::format("`min_doc_tokens` must be >= 0, got {}", o.min_doc_tokens));
  }
  if (o.chunks && *o.chunks < 1) throw ConfigError(fmt::format("`chunks` must be >= 1, got {}", *o.chunks));
  ProtocolPlan plan;
  plan.protocol = protocol;
  plan.average = o.average;
  plan.ctx = ctx;
  const int64_t L = ctx;
  switch (protocol) {
    case EvalProtocol::kPosenc: {
      const std::vector<int>& s = tokens.sequences.at(0);
      const int64_t len = static_cast<int64_t>(s.size());
      int64_t n = n_pred;
      if (all_tokens) {
        n = len >= 1 ? (len - 1) / L * L : 0;
        if (n == 0) throw ConfigError(fmt::format("the text has {} tokens: not one window of {} + 1", len, L));
      } else if (n % L != 0) {
        throw ConfigError(fmt::format("tokens (N) = {} must be a multiple of every ctx; {} % {} = {}", n, n, L, n % L));
      } else if (len - 1 < n) {
        throw ConfigError(fmt::format("the text has {} tokens; N + 1 = {} are needed (N = {} predictions)", len,
                                      n + 1, n));
      }
      for (int64_t w = 0; w < n / L; ++w) {
        ProtocolWindow win;
        win.unit = w;
        win.input.assign(s.begin() + w * L, s.begin() + (w + 1) * L);
        win.targets.assign(s.begin() + w * L + 1, s.begin() + (w + 1) * L + 1);
        plan.windows.push_back(std::move(win));
        plan.part_source.push_back(w);
      }
      break;
    }
    case EvalProtocol::kLlamaPerplexity: {
      const std::vector<int>& s = tokens.sequences.at(0);
      const int64_t len = static_cast<int64_t>(s.size());
      if (len < 2 * L) {
        throw ConfigError(fmt::format("llama-perplexity needs at least 2 ctx = {} tokens (as llama.cpp), the text "
                                      "has {}", 2 * L, len));
      }
      const int64_t fit = len / L;
      int64_t k = o.chunks ? *o.chunks : (all_tokens ? fit : std::max<int64_t>(1, n_pred / L));
      if (k > fit) {
        if (o.chunks) {
          throw ConfigError(fmt::format("`chunks` = {} of {} tokens need {} tokens; the text has {} ({} "
                                        "chunks)", k, L, k * L, len, fit));
        }
        k = fit;  // n_pred asks for more than the text: every chunk, as llama.cpp's n_chunk = min(K, fit)
      }
      const int64_t first = L / 2;
      for (int64_t c = 0; c < k; ++c) {
        ProtocolWindow win;
        win.unit = c;
        win.input.assign(s.begin() + c * L, s.begin() + (c + 1) * L);
        if (tokens.bos >= 0) win.input[0] = tokens.bos;
        win.score_from = first;
        win.targets.assign(win.input.begin() + first + 1, win.input.end());
        plan.windows.push_back(std::move(win));
        plan.part_source.push_back(c);
      }
      break;
    }
    case EvalProtocol::kSliding:
    case EvalProtocol::kTruncate: {
      const int64_t text_tokens = tokens.bos >= 0 ? L - 1 : L;  // document tokens per window
      const int64_t stride = protocol == EvalProtocol::kTruncate ? text_tokens : o.stride;
      int64_t budget = 0;
      for (size_t d = 0; d < tokens.sequences.size(); ++d) {
        if (!all_tokens && budget >= n_pred) break;
        const std::vector<int>& doc = tokens.sequences[d];
        const int64_t len = static_cast<int64_t>(doc.size());
        if (len < std::max<int64_t>(o.min_doc_tokens, tokens.bos >= 0 ? 1 : 2)) continue;  // nothing to score
        budget += len;
        const int64_t unit = plan.n_parts;
        plan.part_source.push_back(static_cast<int64_t>(d));
        ++plan.n_parts;
        const int64_t seq_len = protocol == EvalProtocol::kTruncate ? std::min(len, text_tokens) : len;
        int64_t prev_end = 0;
        for (int64_t begin = 0; begin < seq_len; begin += stride) {
          const int64_t end = std::min(begin + text_tokens, seq_len);
          ProtocolWindow win = DocumentWindow(doc, begin, end, prev_end, tokens.bos, unit);
          if (!win.targets.empty()) plan.windows.push_back(std::move(win));
          prev_end = end;
          if (end == seq_len) break;
        }
      }
      if (plan.n_parts == 0) {
        throw ConfigError(fmt::format("no document of the text has at least {} tokens (`min_doc_tokens`): nothing "
                                      "to evaluate", std::max<int64_t>(o.min_doc_tokens, 1)));
      }
      break;
    }
  }
  if (protocol == EvalProtocol::kPosenc || protocol == EvalProtocol::kLlamaPerplexity) {
    plan.n_parts = static_cast<int64_t>(plan.windows.size());
  }
  for (const ProtocolWindow& w : plan.windows) plan.n_scored += static_cast<int64_t>(w.targets.size());
  return plan;
}

}  // namespace posenc
