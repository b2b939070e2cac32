#include "posenc/train/data.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"

namespace posenc {
namespace {

void AppendDocuments(const std::vector<std::string_view>& docs, size_t begin, size_t end, const Tokenizer& tokenizer,
                     std::vector<int32_t>& out) {
  // BOS opens each document; a vocabulary without one (Qwen's) closes it with EOS (<|endoftext|>) instead.
  const bool bos = tokenizer.bos_id() >= 0;
  const bool eos = !bos && tokenizer.eos_id() >= 0;
  for (size_t i = begin; i < end; ++i) {
    for (const int id : tokenizer.Encode(docs[i], bos, eos)) out.push_back(static_cast<int32_t>(id));
  }
}

}  // namespace

TrainText SplitTrainText(std::string_view text, std::string_view held_out_text, const Tokenizer& tokenizer) {
  TrainText t;
  const std::vector<std::string_view> docs = SplitDocuments(text);
  t.n_documents = static_cast<int64_t>(docs.size());
  if (!held_out_text.empty()) {
    t.n_train_documents = t.n_documents;
    AppendDocuments(docs, 0, docs.size(), tokenizer, t.train);
    const std::vector<std::string_view> held = SplitDocuments(held_out_text);
    AppendDocuments(held, 0, held.size(), tokenizer, t.held_out);
    t.rule = fmt::format("all {} documents of the training text train; the {} documents of the held-out file are "
                         "held out", t.n_documents, held.size());
    return t;
  }
  const int64_t n_train =
      std::max<int64_t>(1, static_cast<int64_t>(kTrainDocumentFraction * static_cast<double>(t.n_documents)));
  t.n_train_documents = n_train;
  AppendDocuments(docs, 0, static_cast<size_t>(n_train), tokenizer, t.train);
  AppendDocuments(docs, static_cast<size_t>(n_train), docs.size(), tokenizer, t.held_out);
  t.rule = n_train < t.n_documents
               ? fmt::format("documents 1-{} of {} train (the first 80%), {}-{} are held out", n_train,
                             t.n_documents, n_train + 1, t.n_documents)
               : fmt::format("the text's {} document(s) all train (80% rounds to all); nothing is held out",
                             t.n_documents);
  return t;
}

void SampleWindows(const std::vector<int32_t>& tokens, int64_t batch, int64_t ctx, uint64_t seed, int64_t step,
                   std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  if (batch < 1 || ctx < 1) throw RangeError(fmt::format("batch and ctx must be >= 1, got {} and {}", batch, ctx));
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n < ctx + 1) {
    throw RangeError(fmt::format("`ctx` {} needs at least {} training tokens, the training text has {}", ctx,
                                 ctx + 1, n));
  }
  std::mt19937_64 g(seed ^ (static_cast<uint64_t>(step) * 0x9E3779B97F4A7C15ull));
  const uint64_t starts = static_cast<uint64_t>(n - ctx);  // start in [0, n - ctx - 1]
  inputs.resize(static_cast<size_t>(batch * ctx));
  targets.resize(static_cast<size_t>(batch * ctx));
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t s = static_cast<int64_t>(g() % starts);
    std::copy_n(tokens.begin() + s, ctx, inputs.begin() + b * ctx);
    std::copy_n(tokens.begin() + s + 1, ctx, targets.begin() + b * ctx);
  }
}

}  // namespace posenc
