// The tokenizer stored in a GGUF file's `tokenizer.ggml.*` metadata (vocab-only or full model files).
#pragma once

#include <memory>

#include "posenc/formats/gguf.h"
#include "posenc/tokenizer/bpe.h"
#include "posenc/tokenizer/spm.h"

namespace posenc {

/// A SentencePiece vocabulary (tokenizer.ggml.model = "llama"): tokens, scores (0 when absent), token_type
/// (normal when absent; 0 "undefined" read as normal), bos/eos/unknown_token_id (llama.cpp's defaults 1, 2, 0
/// when absent), add_bos_token (default true), add_eos_token (false), add_space_prefix (true).
/// Errors: ConfigError naming the file and the key for a missing tokens array, a value of the wrong type, a
/// token type outside 0..6 (names the index), a special token id outside [0, n); the GGUF reader's errors.
/// Source: llama.cpp src/llama-vocab.cpp `llama_vocab::impl::load` (b4748).
SpmVocab ReadGgufSpmVocab(const GgufFile& gguf);

/// A byte-level BPE vocabulary (tokenizer.ggml.model = "gpt2"): tokens, token_type, merges ("a b", split at
/// the first space after the first byte), bos/eos/unknown_token_id (none when absent), add_bos_token (default
/// true for the Llama 3 pre-tokenizers llama-bpe / llama3 / llama-v3, false otherwise), add_eos_token;
/// USER_DEFINED tokens are matched whole in the text; ignore_merges for the Llama 3 pre-tokenizers.
/// Errors: as ReadGgufSpmVocab; ConfigError for a missing merges array or a merge without a space.
BpeVocab ReadGgufBpeVocab(const GgufFile& gguf);

/// The tokenizer of a GGUF file: SpmTokenizer for "llama", BpeTokenizer with GgufPreTokenizer(
/// tokenizer.ggml.pre) for "gpt2"; a "gpt2" vocabulary without tokenizer.ggml.pre gets the "default"
/// pre-tokenizer and a note saying so (Tokenizer::notes; llama.cpp's "missing pre-tokenizer type" warning).
/// Errors: ConfigError naming the file and the value for another tokenizer.ggml.model ("bert", "t5", "rwkv",
/// ... are not supported) or a missing one; as the readers and the tokenizers' constructors.
std::unique_ptr<Tokenizer> LoadGgufTokenizer(const GgufFile& gguf);

}  // namespace posenc
