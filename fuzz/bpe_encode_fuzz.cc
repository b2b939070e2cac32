// Differential fuzz harness: the byte-level BPE encoder (per-word heap, O(n log n)) against the plain loop
// (per pre-tokenizer word, merge the adjacent pair of lowest rank, leftmost on ties), on merge lists the input
// builds over the 256 byte characters, with a pre-tokenizer chosen among llama.cpp's, ignore_merges on or off,
// and an added token. Texts are raw bytes (invalid UTF-8 included).
//
// Oracles: Encode equals EncodeReference; ids are in range; Decode gives the text back byte for byte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/bpe.h"
#include "posenc/tokenizer/byte_level.h"
#include "tokenizer_fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const kPre[] = {"gpt-2", "llama-bpe", "qwen2", "deepseek-llm", "starcoder", "falcon",
                                     "default", "deepseek-coder", "bloom"};
  static const std::vector<std::string> kPieces = {"a", "b", " ", "1", "\xC3", "\xA9", "\xFF", "'", "\n"};
  posenc::fuzz::FuzzInput in(data, size);
  const posenc::ByteLevelMap& map = posenc::ByteLevelMap::Get();
  posenc::BpeVocab v;
  v.source = "fuzz";
  for (int b = 0; b < 256; ++b) v.tokens.push_back(map.Char(static_cast<unsigned char>(b)));
  std::vector<std::string> formed = kPieces;
  const size_t n = in.Below(48);
  for (size_t i = 0; i < n; ++i) {
    const std::string& x = formed[in.Below(formed.size())];
    const std::string& y = formed[in.Below(formed.size())];
    v.merges.emplace_back(map.Encode(x), map.Encode(y));
    const std::string m = map.Encode(x + y);
    bool have = false;
    for (const std::string& t : v.tokens) have = have || t == m;
    if (!have) v.tokens.push_back(m);
    formed.push_back(x + y);
  }
  v.ignore_merges = in.Bit();
  v.types.assign(v.tokens.size(), posenc::TokenType::kNormal);
  if (in.Bit()) {
    v.tokens.push_back("<|x|>");
    v.types.push_back(posenc::TokenType::kUserDefined);
    v.added.push_back({static_cast<int>(v.tokens.size()) - 1, "<|x|>", false, false});
  }
  const char* pre = kPre[in.Below(sizeof(kPre) / sizeof(kPre[0]))];
  const std::string text(in.Rest().substr(0, 256));
  try {
    const posenc::BpeTokenizer tok(v, posenc::GgufPreTokenizer(pre));
    const std::vector<int> ids = tok.Encode(text, false);
    posenc::fuzz::Require(ids == tok.EncodeReference(text), "bpe_encode", "heap encode differs from the plain loop");
    for (int id : ids) posenc::fuzz::Require(id >= 0 && id < tok.vocab_size(), "bpe_encode", "id out of range");
    posenc::fuzz::Require(tok.Decode(ids) == text, "bpe_encode", "decode does not give the bytes back");
  } catch (const posenc::Error&) {
  }
  return 0;
}
