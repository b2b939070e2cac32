// Differential fuzz harness: the llama2.c encoder (heap, O(n log n)) against llama2.c's own loop (merge the
// best-scoring adjacent pair, leftmost on ties, while its score is > -1e10), on vocabularies the input builds
// over a small alphabet, with scores that include NaN, +-inf, -1e10 and ties, duplicate and empty pieces.
//
// Input: a piece count, then per piece a score choice and a length and its characters, then the text's
// characters. The export layout is kept (<unk>, BOS, EOS, 256 byte pieces), so byte fallback is in range.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/llama2c.h"
#include "tokenizer_fuzz_input.h"

namespace {

const std::vector<std::string> kAlphabet = {"a", "b", " ", "\xC3\xA9", "\xC3", "\xA9", "<0x41>", ""};

float Score(uint8_t choice) {
  switch (choice % 12) {
    case 0:
      return std::numeric_limits<float>::quiet_NaN();
    case 1:
      return std::numeric_limits<float>::infinity();
    case 2:
      return -std::numeric_limits<float>::infinity();
    case 3:
      return -1e10f;
    case 4:
      return std::nextafter(-1e10f, 0.0f);
    case 5:
      return std::nextafter(-1e10f, -1e11f);
    default:
      return static_cast<float>(static_cast<int>(choice % 7) - 3);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  posenc::fuzz::FuzzInput in(data, size);
  std::vector<std::pair<float, std::string>> pieces = {{0.0f, "<unk>"}, {0.0f, "\n<s>\n"}, {0.0f, "\n</s>\n"}};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    pieces.push_back({0.0f, buf});
  }
  pieces.push_back({0.0f, " "});
  const size_t n = in.Below(48);
  for (size_t i = 0; i < n; ++i) {
    const float score = Score(in.Byte());
    pieces.push_back({score, in.Text(kAlphabet, in.Below(5))});
  }
  const std::string text = in.Text(kAlphabet, in.Below(40));
  try {
    const posenc::Llama2cTokenizer tok =
        posenc::Llama2cTokenizer::FromBytes(posenc::Llama2cTokenizer::FileBytes(pieces), static_cast<int64_t>(pieces.size()), "fuzz");
    posenc::fuzz::Require(tok.Encode(text, false, false) == tok.EncodeReference(text), "llama2c_encode",
                          "heap encode differs from llama2.c's loop");
  } catch (const posenc::Error&) {
  }
  return 0;
}
