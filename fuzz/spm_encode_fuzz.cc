// Differential fuzz harness: the SentencePiece encoder (heap over independent parts, O(n log n)) against the
// plain loop (merge the best-scoring adjacent pair by string concatenation, leftmost on ties), on vocabularies
// the input builds: pieces over a small alphabet with "▁", multi-byte and invalid UTF-8, scores with ties and
// infinities (NaN must be refused at construction), all six token types, with or without byte pieces and the
// dummy prefix. Texts mix the same characters with raw bytes.
//
// Oracles: Encode equals EncodeReference; ids are in range; with byte pieces and no user-defined piece holding
// "▁", Decode gives the text back with each "▁" read as a space.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/spm.h"
#include "tokenizer_fuzz_input.h"

namespace {

constexpr const char* kSp = "\xE2\x96\x81";
const std::vector<std::string> kAlphabet = {"a", "b", " ", kSp, "\xC3\xA9", "\xF0\x9F\x99\x82", "\xFF", "\xC3", "<"};

float Score(uint8_t c) {
  switch (c % 10) {
    case 0:
      return std::numeric_limits<float>::infinity();
    case 1:
      return -std::numeric_limits<float>::infinity();
    case 2:
      return c > 128 ? std::numeric_limits<float>::quiet_NaN() : 0.5f;
    default:
      return static_cast<float>(static_cast<int>(c % 5)) - 2.0f;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  posenc::fuzz::FuzzInput in(data, size);
  posenc::SpmVocab v;
  v.source = "fuzz";
  auto add = [&](std::string t, float s, posenc::TokenType type) {
    v.tokens.push_back(std::move(t));
    v.scores.push_back(s);
    v.types.push_back(type);
  };
  add("<unk>", 0, posenc::TokenType::kUnknown);
  add("<s>", 0, posenc::TokenType::kControl);
  add("</s>", 0, posenc::TokenType::kControl);
  v.unk_id = in.Bit() ? 0 : -1;
  v.bos_id = 1;
  v.eos_id = 2;
  v.add_space_prefix = in.Byte() % 4 != 0;
  add(kSp, 0, posenc::TokenType::kNormal);
  const bool bytes = in.Byte() % 4 != 0;
  bool ud_space = false;
  const size_t n = in.Below(40);
  for (size_t i = 0; i < n; ++i) {
    const float score = Score(in.Byte());
    const auto type = static_cast<posenc::TokenType>(1 + in.Below(6));
    std::string t = in.Text(kAlphabet, 1 + in.Below(4));
    ud_space = ud_space || (type == posenc::TokenType::kUserDefined && t.find(kSp) != std::string::npos);
    add(std::move(t), score, type);
  }
  if (bytes) {
    char buf[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      add(buf, 0, posenc::TokenType::kByte);
    }
  }
  std::string text = in.Text(kAlphabet, in.Below(32));
  const std::string_view raw = in.Rest();
  text.append(raw.substr(0, 64));
  try {
    const posenc::SpmTokenizer tok(v);
    const std::vector<int> ids = tok.Encode(text, false);
    posenc::fuzz::Require(ids == tok.EncodeReference(text), "spm_encode", "heap encode differs from the plain loop");
    for (int id : ids) posenc::fuzz::Require(id >= 0 && id < tok.vocab_size(), "spm_encode", "id out of range");
    const std::string decoded = tok.Decode(ids);
    if (bytes && !ud_space) {
      std::string expect;
      for (size_t at = 0; at < text.size();) {
        if (text.compare(at, 3, kSp) == 0) {
          expect += ' ';
          at += 3;
        } else {
          expect += text[at++];
        }
      }
      posenc::fuzz::Require(decoded == expect, "spm_encode", "decode does not give the text back");
    }
  } catch (const posenc::Error&) {
  }
  return 0;
}
