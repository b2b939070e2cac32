// llama2.c tokenizer: encodings from the independent oracle (ref_llama2c.py), the heap-based
// merge loop against a literal transcription of llama2.c's O(n^2) loop, decode round trips, wrong vocab sizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
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
  // Produced by the oracle's Tokenizer.encode(text, bos=True) (numpy oracle, written from the
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


std::string Llama2cBytes(const std::vector<std::pair<float, std::string>>& pieces) {
  return Llama2cTokenizer::FileBytes(pieces);
}

// The llama2.c export layout: <unk>, BOS, EOS, the 256 byte pieces (ids byte + 3), then `rest`.
std::vector<std::pair<float, std::string>> ExportLayout(const std::vector<std::pair<float, std::string>>& rest) {
  std::vector<std::pair<float, std::string>> pieces = {{0.0f, "<unk>"}, {0.0f, "\n<s>\n"}, {0.0f, "\n</s>\n"}};
  char buf[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    pieces.push_back({0.0f, buf});
  }
  pieces.insert(pieces.end(), rest.begin(), rest.end());
  return pieces;
}

// Pieces scored NaN, -inf or <= -1e10 are never formed by llama2.c's loop (best_score starts at -1e10 and a
// pair must score strictly more); the heap encoder must agree.
TEST(TokenizerTest, PiecesScoredNanOrBelowTheLoopThresholdNeverMerge) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const auto pieces = ExportLayout({{0.0f, " "},  {0.0f, "a"},     {0.0f, "b"},      {0.0f, "c"},
                                    {nan, "ab"},  {-inf, "bc"},    {-1e10f, "ca"},   {-2e10f, " a"},
                                    {-1.0f, "ba"}, {inf, "cc"},    {-9.9e9f, "ac"}});
  const Llama2cTokenizer tok = Llama2cTokenizer::FromBytes(Llama2cBytes(pieces), static_cast<int64_t>(pieces.size()));
  const int space = tok.Lookup(" "), a = tok.Lookup("a"), b = tok.Lookup("b"), c = tok.Lookup("c");
  EXPECT_EQ(tok.Encode("ab", false, false), (std::vector<int>{space, a, b}));      // NaN: never
  EXPECT_EQ(tok.Encode("bc", false, false), (std::vector<int>{space, b, c}));      // -inf: never
  EXPECT_EQ(tok.Encode("ca", false, false), (std::vector<int>{space, c, a}));      // -1e10: not > -1e10
  EXPECT_EQ(tok.Encode("ba", false, false), (std::vector<int>{space, tok.Lookup("ba")}));
  EXPECT_EQ(tok.Encode("cc", false, false), (std::vector<int>{space, tok.Lookup("cc")}));        // +inf merges
  EXPECT_EQ(tok.Encode("ac", false, false), (std::vector<int>{space, tok.Lookup("ac")}));        // -9.9e9 merges
  for (const std::string s : {"ab", "bc", "ca", "abcabc", "cccc", "acbacab", "a b c", "bbaacc"}) {
    EXPECT_EQ(tok.Encode(s, false, false), NaiveEncode(tok, s)) << s;
    EXPECT_EQ(tok.EncodeReference(s), NaiveEncode(tok, s)) << s;
  }
}

// Random vocabularies over a small alphabet with random scores (ties, NaN, infinities, the threshold, duplicate
// and empty pieces) and random texts: the heap encoder equals llama2.c's loop on every one.
TEST(TokenizerTest, HeapEqualsLoopOnRandomVocabularies) {
  std::mt19937 rng(20240611);
  const std::string alphabet = "ab c\xC3\xA9";
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::infinity(), -1e10f, -1e10f * 1.0000001f, 0.0f, 1.0f, -1.0f};
  for (int v = 0; v < 200; ++v) {
    std::vector<std::pair<float, std::string>> rest = {{0.0f, " "}};
    const int n = 2 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      std::string p;
      const int len = static_cast<int>(rng() % 5);
      for (int k = 0; k < len; ++k) p += alphabet[rng() % alphabet.size()];
      const float score = rng() % 3 == 0 ? specials[rng() % 8] : static_cast<float>(static_cast<int>(rng() % 7) - 3);
      rest.push_back({score, p});
    }
    const auto pieces = ExportLayout(rest);
    const Llama2cTokenizer tok =
        Llama2cTokenizer::FromBytes(Llama2cBytes(pieces), static_cast<int64_t>(pieces.size()));
    for (int t = 0; t < 20; ++t) {
      std::string text;
      const int len = static_cast<int>(rng() % 24);
      for (int k = 0; k < len; ++k) text += alphabet[rng() % alphabet.size()];
      ASSERT_EQ(tok.Encode(text, false, false), NaiveEncode(tok, text)) << "vocabulary " << v << " text '" << text << "'";
      ASSERT_EQ(tok.EncodeReference(text), NaiveEncode(tok, text));
    }
  }
}

TEST(TokenizerTest, InterfaceFacts) {
  const Llama2cTokenizer& tok = testing::Tok512();
  const Tokenizer& base = tok;
  EXPECT_EQ(base.Encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  EXPECT_EQ(base.vocab_size(), 512);
  EXPECT_EQ(base.bos_id(), 1);
  EXPECT_EQ(base.eos_id(), 2);
  EXPECT_TRUE(base.add_bos_default());
  EXPECT_EQ(base.Type(0), TokenType::kUnknown);
  EXPECT_EQ(base.Type(1), TokenType::kControl);
  EXPECT_EQ(base.Type(13), TokenType::kByte);
  EXPECT_EQ(base.Type(403), TokenType::kNormal);
  EXPECT_THROW(base.Type(512), RangeError);
  EXPECT_EQ(Llama2cTokenizer::CountPieces(ReadTextFile(testing::TokenizerPath())), 512);
}

TEST(TokenizerTest, BadFilesAreErrorsNotCrashes) {
  // A negative piece length, an absurd vocabulary size (no allocation of it), byte fallback past the vocabulary.
  std::string bytes = Llama2cBytes({{0.0f, "<unk>"}, {0.0f, "<s>"}, {0.0f, "</s>"}});
  int32_t negative = -5;
  std::memcpy(&bytes[4 + 4], &negative, 4);
  EXPECT_THROW(Llama2cTokenizer::FromBytes(bytes, 3), IoError);
  EXPECT_THROW(Llama2cTokenizer::CountPieces(bytes), IoError);
  const std::string ok = Llama2cBytes({{0.0f, "<unk>"}, {0.0f, "<s>"}, {0.0f, "</s>"}, {0.0f, " "}});
  EXPECT_THROW(Llama2cTokenizer::FromBytes(ok, int64_t{1} << 40), IoError);  // truncated in piece 4
  const Llama2cTokenizer small = Llama2cTokenizer::FromBytes(ok, 4);
  EXPECT_THROW(small.Encode("x", false, false), ConfigError);  // byte 'x' falls back to id 123 >= 4
  EXPECT_EQ(small.Encode(" ", false, false), (std::vector<int>{3, 3}));
  EXPECT_THROW(Llama2cTokenizer::CountPieces("ab"), IoError);
}

}  // namespace
}  // namespace posenc
