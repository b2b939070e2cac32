// Fuzz harness: bytes as a Hugging Face tokenizer.json (bounded-depth parse, model, vocabulary, merges, added
// tokens, pre-tokenizer, post-processor). An accepted file then encodes a fixed text and the input's own first
// bytes; the heap encoder must equal the plain loop on both, every id must be in range, and Decode must not fail.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/hf_tokenizer_json.h"
#include "tokenizer_fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  std::unique_ptr<posenc::BpeTokenizer> tok;
  try {
    tok = posenc::LoadHfTokenizerJson(json, "fuzz.json");
  } catch (const posenc::Error&) {
    return 0;
  }
  for (const std::string_view text : {std::string_view("Hello, world! 123 \xC3\xA9\xF0\x9F\x99\x82\n\t x"),
                                      json.substr(0, 128)}) {
    try {
      const std::vector<int> ids = tok->Encode(text, false);
      posenc::fuzz::Require(ids == tok->EncodeReference(text), "tokenizer_json", "heap encode differs from the loop");
      for (int id : ids) posenc::fuzz::Require(id >= 0 && id < tok->vocab_size(), "tokenizer_json", "id out of range");
      tok->Decode(ids);
    } catch (const posenc::Error&) {
    }
  }
  return 0;
}
