// Hugging Face `tokenizer.json` (the tokenizers library's serialization) for byte-level BPE models.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "posenc/tokenizer/bpe.h"

namespace posenc {

/// Builds a byte-level BPE tokenizer from the text of a tokenizer.json and, optionally, of the
/// tokenizer_config.json beside it (empty: none).
///
/// Read: model {type "BPE", vocab {token: id}, merges ["a b", ...] or [["a", "b"], ...], unk_token,
/// ignore_merges}; added_tokens [{id, content, special, lstrip, rstrip}] (special ones are control tokens,
/// matched in the text only under Tokenizer::set_parse_special; the others are always matched whole);
/// pre_tokenizer ByteLevel {add_prefix_space, use_regex}, Split {pattern {Regex | String}, behavior, invert}, Digits
/// {individual_digits}, Punctuation {behavior}, Whitespace, WhitespaceSplit, Sequence of these (it must contain a
/// ByteLevel); post_processor TemplateProcessing (a leading special token is BOS and add_bos, a trailing one EOS and
/// add_eos); tokenizer_config.json bos_token / eos_token / add_bos_token / add_eos_token (they take
/// precedence). normalizer: none, or NFC, applied to every plain-text run before the pre-tokenizer, as Hugging
/// Face does (NormalizeNfc; added tokens are matched in the text as given, before it).
/// Errors: IoError naming `source` for JSON that does not parse or nests deeper than kMaxJsonDepth
/// (io/json_read.h: real files nest about 6 deep); ConfigError naming `source` and the field for: a model type other
/// than BPE (WordPiece, Unigram, WordLevel: "not supported"); a BPE that is not byte-level (SentencePiece-style
/// byte_fallback / Metaspace files: use tokenizer.model); dropout, continuing_subword_prefix, end_of_word_suffix,
/// single_word added tokens, other normalizers or pre-tokenizers (named); ids that are negative, repeated or leave a
/// gap; merges naming unknown tokens; and everything BpeTokenizer rejects.
/// Source: huggingface/tokenizers tokenizer/serialization.rs, models/bpe/serialization.rs,
/// pre_tokenizers/{byte_level,split,digits,punctuation,whitespace,sequence}.rs, processors/template.rs.
std::unique_ptr<BpeTokenizer> LoadHfTokenizerJson(std::string_view tokenizer_json, const std::string& source,
                                                  std::string_view tokenizer_config_json = {});

}  // namespace posenc
