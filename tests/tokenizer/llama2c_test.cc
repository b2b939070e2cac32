// llama2.c tokenizer: encodings from the independent oracle (shared/tools/ref_llama2c.py), the heap-based
// merge loop against a literal transcription of llama2.c's O(n^2) loop, decode round trips, wrong vocab sizes.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/tokenizer/llama2c.h"

namespace posenc {
namespace {

// llama2.c run.c `encode` (without BOS/EOS), transcribed literally: O(n^2), the reference for Encode.
std::vector<int> NaiveEncode(const Llama2cTokenizer& tok, const std::string& text) {
  std::vector<int> toks;
  if (!text.empty()) toks.push_back(tok.Lookup(" "));
  std::string buf;
  for (size_t k = 0; k < text.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(text[k]);
    if ((c & 0xC0) != 0x80) buf.clear();
    buf += static_cast<char>(c);
    if (k + 1 < text.size() && (static_cast<unsigned char>(text[k + 1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
    const int id = tok.Lookup(buf);
    if (id != -1) {
      toks.push_back(id);
    } else {
      for (unsigned char b : buf) toks.push_back(b + 3);
    }
    buf.clear();
  }
  while (true) {
    float best_score = -1e10f;
    int best_id = -1;
    size_t best_idx = 0;
    for (size_t i = 0; i + 1 < toks.size(); ++i) {
      const int id = tok.Lookup(tok.Piece(toks[i]) + tok.Piece(toks[i + 1]));
      if (id != -1 && tok.score(id) > best_score) {
        best_score = tok.score(id);
        best_id = id;
        best_idx = i;
      }
    }
    if (best_id == -1) break;
    toks[best_idx] = best_id;
    toks.erase(toks.begin() + static_cast<std::ptrdiff_t>(best_idx) + 1);
  }
  return toks;
}

TEST(TokenizerTest, EncodingsFromTheOracle) {
  // Produced by shared/tools/ref_llama2c.py Tokenizer.encode(text, bos=True) (numpy oracle, written from the
  // format description independently of this code).
  const Llama2cTokenizer& tok = testing::Tok512();
  EXPECT_EQ(tok.Encode("Once upon a time", true, false), (std::vector<int>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok.Encode("", true, false), (std::vector<int>{1}));  // no dummy prefix for empty text
  EXPECT_EQ(tok.Encode("Hello\n\nworld", true, false),
            (std::vector<int>{1, 346, 306, 414, 13, 13, 424, 304, 341}));
  // "é" is a piece; the emoji is not, so its 4 UTF-8 bytes F0 9F 99 82 fall back to ids byte + 3.
  EXPECT_EQ(tok.Encode("\xC3\xA9\xF0\x9F\x99\x82 x", true, false),
            (std::vector<int>{1, 410, 485, 0xF0 + 3, 0x9F + 3, 0x99 + 3, 0x82 + 3, 410, 444}));
  EXPECT_EQ(tok.Encode("", true, true), (std::vector<int>{1, 2}));
}

TEST(TokenizerTest, HeapEncodeEqualsLlama2cLoopOnTextSlices) {
  const Llama2cTokenizer& tok = testing::Tok512();
  std::mt19937 rng(1234);
  for (const char* name : {"tinystories_val_stories.txt", "tinyshakespeare.txt", "tinystories_sample_cs336.txt"}) {
    const std::string text = ReadTextFile(testing::TextPath(name));
    for (int k = 0; k < 12; ++k) {
      const size_t len = 200 + rng() % 400;
      const size_t at = rng() % (text.size() - len);
      const std::string slice = text.substr(at, len);  // may cut UTF-8 sequences: both sides see the same bytes
      SCOPED_TRACE(std::string(name) + " at " + std::to_string(at));
      EXPECT_EQ(tok.Encode(slice, false, false), NaiveEncode(tok, slice));
    }
  }
}

TEST(TokenizerTest, TiesMergeLeftmostFirst) {
  // "aaaa": the pair (a, a) ties at every position; llama2.c merges the leftmost first.
  const Llama2cTokenizer& tok = testing::Tok512();
  for (const std::string s : {"aaaa", "aaaaa", "ttttttt", "    ", "lll ll"}) {
    EXPECT_EQ(tok.Encode(s, false, false), NaiveEncode(tok, s)) << s;
  }
}

TEST(TokenizerTest, DecodeInvertsEncode) {
  const Llama2cTokenizer& tok = testing::Tok512();
  for (const char* name : {"tinystories_sample_cs336.txt", "tinyshakespeare.txt"}) {
    const std::string text = ReadTextFile(testing::TextPath(name)).substr(0, 20000);
    EXPECT_EQ(tok.Decode(tok.Encode(text, true, false)), text) << name;
  }
  EXPECT_EQ(tok.Decode(tok.Encode("\xC3\xA9\xF0\x9F\x99\x82 x", true, false)), "\xC3\xA9\xF0\x9F\x99\x82 x");
}

TEST(TokenizerTest, DecodePiece) {
  const Llama2cTokenizer& tok = testing::Tok512();
  EXPECT_EQ(tok.DecodePiece(kBosId, 403), "Once");   // the piece after BOS loses its leading space
  EXPECT_EQ(tok.DecodePiece(403, 407), " upon");
  EXPECT_EQ(tok.DecodePiece(5, 13), "\n");           // <0x0A>
  EXPECT_EQ(tok.Piece(13), "<0x0A>");
  EXPECT_THROW(tok.DecodePiece(1, 512), RangeError);
  EXPECT_THROW(tok.DecodePiece(1, -1), RangeError);
}

TEST(TokenizerTest, WrongVocabSizeIsAnError) {
  // tok512.bin holds exactly 512 pieces: read as 511 it has bytes left over, read as 513 it ends early.
  try {
    Llama2cTokenizer::Load(testing::TokenizerPath(), 511);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("trailing bytes after vocab_size=511"), std::string::npos) << e.what();
  }
  try {
    Llama2cTokenizer::Load(testing::TokenizerPath(), 513);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("truncated in piece 512 of vocab_size 513"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Llama2cTokenizer::Load("/nonexistent/tok.bin", 512), IoError);
  EXPECT_THROW(Llama2cTokenizer::FromBytes(std::string(4, '\0'), 512), IoError);  // max_token_length 0
}

}  // namespace
}  // namespace posenc
