// Training text: documents split into a training part and a held-out part by a fixed rule, token streams, and
// the windows a training step reads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/tokenizer/tokenizer.h"

namespace posenc {

/// The fixed train / held-out rule, stated in every report: the first 80% of a text's documents (rounded down,
/// at least 1) train, the rest are held out. With a separate held-out file, the whole training text trains and
/// the whole held-out file is held out.
inline constexpr double kTrainDocumentFraction = 0.8;

/// Token streams for training and held-out evaluation.
struct TrainText {
  std::vector<int32_t> train;     // [BOS] + Encode(document) (or + [EOS]) per training document, concatenated
  std::vector<int32_t> held_out;  // the same for each held-out document (empty when none are held out)
  int64_t n_documents = 0;        // documents in the training text
  int64_t n_train_documents = 0;  // of which the first n_train_documents train
  std::string rule;               // the split in words, e.g. "documents 1-571 of 714 train, 572-714 held out"
};

/// Splits `text` into documents (eval/documents.h SplitDocuments: "<|endoftext|>" lines), keeps the first
/// max(1, floor(0.8 n)) for training and the rest for held-out evaluation, and tokenizes both (BOS before each
/// document; for a vocabulary without BOS, EOS after it when it has one, else nothing between documents). When
/// `held_out_text` is non-empty, every document of `text` trains and `held_out_text` is held out instead.
/// Errors: as Tokenizer::Encode.
TrainText SplitTrainText(std::string_view text, std::string_view held_out_text, const Tokenizer& tokenizer);

/// The training windows of one step: `batch` rows of ctx + 1 consecutive tokens of `tokens` (inputs are the
/// first ctx, targets the last ctx), each starting at an offset drawn from std::mt19937_64(seed ^ (step *
/// 0x9E3779B97F4A7C15)) uniformly in [0, tokens.size() - ctx - 1] (a modulo of the draw; the bias is below
/// 2^-40 for any text that fits in memory). The draw depends only on (seed, step), so a resumed run reads the
/// same windows as an uninterrupted one.
///
/// Shapes:  inputs, targets resized to [batch, ctx].
/// Errors:  RangeError if the stream holds fewer than ctx + 1 tokens ("`ctx` L needs at least L + 1 training
///          tokens, the training text has n"), or batch < 1 or ctx < 1.
void SampleWindows(const std::vector<int32_t>& tokens, int64_t batch, int64_t ctx, uint64_t seed, int64_t step,
                   std::vector<int32_t>& inputs, std::vector<int32_t>& targets);

}  // namespace posenc
