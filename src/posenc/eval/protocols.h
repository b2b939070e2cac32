// Eval protocols as data: which windows the model sees, which of their positions are scored, which windows form
// one independent unit of the uncertainty, and how the scored NLLs become a perplexity.
//
//   posenc            the stream of [BOS] + document for every document, cut into non-overlapping windows of L;
//                     every position scored (target: the next token of the stream); unit = window.
//   sliding           each document alone, without special tokens; windows begin every S tokens (--stride) and
//                     hold [BOS] + L - 1 document tokens (L tokens where the vocabulary has no BOS); a window
//                     scores the tokens past the previous window's end (the first window all, BOS predicting the
//                     first token); ppl = exp(mean of the windows' mean NLLs) (--average windows, YaRN's
//                     eval/perplexity.py compute_perplexity) or exp(mean over every scored token) (--average
//                     tokens, the Hugging Face perplexity guide); unit = document.
//   llama-perplexity  the whole text as one plain-text string ([BOS] first where the vocabulary adds one);
//                     chunk k = tokens [kL, (k+1)L), its first token replaced by BOS where the vocabulary adds one;
//                     the logits at positions L/2 .. L-2 score tokens L/2+1 .. L-1; the first K chunks (--chunks);
//                     ppl = exp(mean over the scored tokens); unit = token (llama.cpp's +- is the SE of the
//                     token mean); llama.cpp tools/perplexity perplexity().
//   truncate          per document [BOS] + its first L - 1 tokens, every token scored (YaRN's --truncate);
//                     --min-doc-tokens keeps documents of at least that many tokens; unit = document.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

enum class EvalProtocol { kPosenc, kSliding, kLlamaPerplexity, kTruncate };

/// "posenc", "sliding", "llama-perplexity", "truncate".
std::string_view EvalProtocolName(EvalProtocol protocol);
/// Errors: ConfigError "unknown protocol 'x' (expected one of posenc, sliding, llama-perplexity, truncate)".
EvalProtocol ParseEvalProtocol(std::string_view name);

/// How `sliding` averages: the mean of the windows' mean NLLs (YaRN) or of every scored token (HF's guide).
enum class WindowAverage { kWindows, kTokens };
std::string_view WindowAverageName(WindowAverage average);
/// Errors: ConfigError "unknown average 'x' (expected windows or tokens)".
WindowAverage ParseWindowAverage(std::string_view name);

/// The protocol and its parameters (the CLI's --protocol, --stride, --average, --chunks, --min-doc-tokens; the
/// token budget --tokens is BuildProtocolPlan's n_pred / all_tokens).
struct ProtocolOptions {
  EvalProtocol protocol = EvalProtocol::kPosenc;
  int64_t stride = 256;                          // sliding: tokens between window starts, >= 1
  WindowAverage average = WindowAverage::kWindows;  // sliding only
  std::optional<int64_t> chunks;                 // llama-perplexity: the first K chunks (unset: N / L, or
                                                 // every chunk with all_tokens)
  int64_t min_doc_tokens = 0;                    // sliding / truncate: documents shorter than this are dropped
};

/// One forward pass of a protocol: input tokens at positions 0..n-1; targets of the input positions
/// [score_from, score_from + targets.size()).
struct ProtocolWindow {
  std::vector<int> input;    // [n], n <= L
  int64_t score_from = 0;    // first scored input position
  std::vector<int> targets;  // [n_scored]: target of input position score_from + i
  int64_t unit = 0;          // index of the part (document, window or chunk: ProtocolPlan::n_parts) it belongs to
};

/// Every window of one protocol at one window length L.
struct ProtocolPlan {
  EvalProtocol protocol = EvalProtocol::kPosenc;
  WindowAverage average = WindowAverage::kWindows;
  int64_t ctx = 0;                       // L
  std::vector<ProtocolWindow> windows;   // in order; windows of one part are consecutive
  int64_t n_parts = 0;                   // documents (sliding, truncate), windows (posenc), chunks (llama-ppl)
  std::vector<int64_t> part_source;      // [n_parts]: the document's index in the text (SplitDocuments order)
                                         // for sliding / truncate, else the window / chunk index
  int64_t n_scored = 0;                  // scored tokens over every window
};

/// The kind of part a protocol lists per row ("window", "document", "chunk") and of unit its SE counts
/// ("window", "document", "token").
std::string_view PartKind(EvalProtocol protocol);
std::string_view UnitKind(EvalProtocol protocol);

/// The text tokenized as a protocol reads it (once; plans for every L are cut from it).
struct ProtocolTokens {
  EvalProtocol protocol = EvalProtocol::kPosenc;
  std::vector<std::vector<int>> sequences;  // posenc: one, the stream of [BOS] + document (BuildTokenStream);
                                            // llama-perplexity: one, the whole text as plain text ([BOS] first
                                            // where the vocabulary adds one); sliding / truncate: every document
                                            // of SplitDocuments without special tokens, in file order
  int bos = -1;                             // the BOS id where the vocabulary adds one (add_bos_default), else -1
  int64_t n_documents = 0;                  // SplitDocuments of the text
};

/// Tokenizes `text` for `protocol` (documents encoded in parallel; the result does not depend on the threads).
/// add_bos: whether windows / documents / the stream begin with BOS; unset: the tokenizer's own rule
/// (Tokenizer::add_bos_default).
/// Errors: as Tokenizer::Encode; ConfigError if add_bos is true and the tokenizer has no BOS.
ProtocolTokens TokenizeForProtocol(std::string_view text, const Tokenizer& tokenizer, EvalProtocol protocol,
                                   std::optional<bool> add_bos = std::nullopt);

/// The windows of `options.protocol` at window length L = ctx, with token budget N = n_pred (all_tokens: the
/// whole text, `--tokens all`).
/// Token budget: posenc scores the first N predictions of the stream (N a multiple of L), or every whole window
/// with all_tokens; sliding and truncate use the documents (after --min-doc-tokens), in file order, until their
/// tokens reach N (every document with all_tokens); llama-perplexity the first `chunks` chunks (unset: N / L,
/// at least 1; every chunk that fits with all_tokens).
/// Errors: ConfigError naming the flag if L < 2, stride < 1, min_doc_tokens < 0, chunks < 1, N <= 0 (without
///   all_tokens), N not a multiple of L (posenc), the text too short (posenc: fewer than N + 1 tokens, or not
///   one window with all_tokens; llama-perplexity: fewer than 2 L tokens, as llama.cpp refuses, or fewer chunks
///   than asked), no document left (sliding / truncate), tokens.protocol != options.protocol.
ProtocolPlan BuildProtocolPlan(const ProtocolTokens& tokens, int64_t ctx, const ProtocolOptions& options,
                               int64_t n_pred, bool all_tokens);

}  // namespace posenc
