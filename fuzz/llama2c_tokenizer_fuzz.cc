// Fuzz harness: bytes as a llama2.c tokenizer file, then encode and decode with it.
//
// Input: byte 0 picks the vocabulary size (0: count the pieces to the end of the file; k > 0: k + 2, which
// makes most files too short or too long), byte 1 the length of the text that follows, then the text, then the
// tokenizer file. Beyond "no crash, no sanitizer report, no exception other than posenc::Error": an accepted
// file encodes the text to ids in [0, vocab_size), exactly as llama2.c's O(n^2) loop does (EncodeReference),
// and Decode of those ids never fails.
#include <cstddef>
#include <cstdint>
#include <string>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/llama2c.h"
#include "tokenizer_fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  posenc::fuzz::FuzzInput in(data, size);
  const uint8_t vocab_choice = in.Byte();
  const size_t text_len = in.Byte();
  std::string text;
  for (size_t i = 0; i < text_len; ++i) text += static_cast<char>(in.Byte());
  const std::string_view file = in.Rest();
  try {
    const int64_t n = vocab_choice == 0 ? posenc::Llama2cTokenizer::CountPieces(file, "fuzz")
                                        : static_cast<int64_t>(vocab_choice) + 2;
    const posenc::Llama2cTokenizer tok = posenc::Llama2cTokenizer::FromBytes(file, n, "fuzz");
    const std::vector<int> ids = tok.Encode(text, true, true);
    for (int id : ids) posenc::fuzz::Require(id >= 0 && id < tok.vocab_size(), "llama2c_tokenizer", "id out of range");
    const std::vector<int> body = tok.Encode(text, false, false);
    posenc::fuzz::Require(body == tok.EncodeReference(text), "llama2c_tokenizer", "heap encode differs from the loop");
    tok.Decode(ids);
  } catch (const posenc::Error&) {
  }
  return 0;
}
