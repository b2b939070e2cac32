// SentencePiece BPE: the rules one at a time on small vocabularies (dummy prefix, "▁", byte fallback, unknown
// token, user-defined pieces, control pieces), what the constructor rejects, the heap against the plain loop on
// random vocabularies, and invalid UTF-8 on the real Llama vocabulary.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/load.h"
#include "posenc/tokenizer/spm.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

constexpr const char* kSp = "\xE2\x96\x81";  // ▁

struct Piece {
  std::string text;
  float score = 0.0f;
  TokenType type = TokenType::kNormal;
};

// <unk>, <s>, </s>, then `pieces`; with `bytes`, the 256 "<0xXX>" pieces after them.
SpmVocab MakeVocab(const std::vector<Piece>& pieces, bool bytes) {
  SpmVocab v;
  v.source = "test vocabulary";
  auto add = [&](const std::string& t, float s, TokenType ty) {
    v.tokens.push_back(t);
    v.scores.push_back(s);
    v.types.push_back(ty);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  for (const Piece& p : pieces) add(p.text, p.score, p.type);
  if (bytes) {
    char buf[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
      add(buf, 0, TokenType::kByte);
    }
  }
  return v;
}

int Id(const SpmTokenizer& t, const std::string& text) {
  for (int i = 0; i < t.vocab_size(); ++i) {
    if (t.Piece(i) == text) return i;
  }
  return -1;
}

TEST(SpmTest, DummyPrefixSpacesAndMergeOrder) {
  const SpmTokenizer t(MakeVocab({{kSp, -1}, {"a", -1}, {"b", -1}, {std::string(kSp) + "a", -2},
                                  {"ab", -3}, {std::string(kSp) + "ab", -4}, {"ba", -0.5f}},
                                 true));
  const std::string sp_a = std::string(kSp) + "a";
  // "ab": ▁ a b -> (▁a scores -2 > ab -3) ▁a b -> ▁ab.
  EXPECT_EQ(t.Encode("ab", false), (std::vector<int>{Id(t, sp_a + "b")}));
  // "bab": ▁ b a b -> ba (-0.5) first -> ▁ ba b; no piece "▁ba" or "bab".
  EXPECT_EQ(t.Encode("bab", false), (std::vector<int>{Id(t, kSp), Id(t, "ba"), Id(t, "b")}));
  EXPECT_EQ(t.Encode("", false), std::vector<int>{});           // no prefix for an empty text
  EXPECT_EQ(t.Encode("", true), std::vector<int>{1});
  EXPECT_EQ(t.Encode(" a", false), (std::vector<int>{Id(t, kSp), Id(t, sp_a)}));
  EXPECT_EQ(t.Decode(t.Encode(" a", true)), " a");
  EXPECT_EQ(t.Decode(t.Encode("ab bab", false)), "ab bab");
  SpmVocab no_prefix = MakeVocab({{kSp, -1}, {"a", -1}}, true);
  no_prefix.add_space_prefix = false;
  const SpmTokenizer u(no_prefix);
  EXPECT_EQ(u.Encode("a", false), (std::vector<int>{Id(u, "a")}));
  EXPECT_EQ(u.Decode(u.Encode(" a a", false)), " a a");
}

TEST(SpmTest, TiesMergeLeftmostFirst) {
  const SpmTokenizer t(MakeVocab({{kSp, 0}, {"a", 0}, {"aa", -1}}, true));
  // ▁ a a a: the pair (a, a) ties at two positions; the leftmost merges: ▁ aa a.
  EXPECT_EQ(t.Encode("aaa", false), (std::vector<int>{Id(t, kSp), Id(t, "aa"), Id(t, "a")}));
  EXPECT_EQ(t.Encode("aaa", false), t.EncodeReference("aaa"));
}

TEST(SpmTest, ByteFallbackThenUnknownThenError) {
  const SpmTokenizer bytes(MakeVocab({{kSp, 0}, {"a", 0}}, true));
  // "é" (C3 A9) is no piece: its bytes.
  const int c3 = Id(bytes, "<0xC3>"), a9 = Id(bytes, "<0xA9>");
  EXPECT_EQ(bytes.Encode("a\xC3\xA9", false), (std::vector<int>{Id(bytes, kSp), Id(bytes, "a"), c3, a9}));
  EXPECT_EQ(bytes.Decode(bytes.Encode("a\xC3\xA9", false)), "a\xC3\xA9");
  const SpmTokenizer unk(MakeVocab({{kSp, 0}, {"a", 0}}, false));
  EXPECT_EQ(unk.Encode("a\xC3\xA9", false), (std::vector<int>{Id(unk, kSp), Id(unk, "a"), 0}));  // one <unk>
  SpmVocab none = MakeVocab({{kSp, 0}, {"a", 0}}, false);
  none.unk_id = -1;
  const SpmTokenizer no_unk(none);
  try {
    no_unk.Encode("a\xC3\xA9", false);
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("C3A9"), std::string::npos) << e.what();
  }
}

TEST(SpmTest, UserDefinedKeptWholeControlNeverFormed) {
  const SpmTokenizer t(MakeVocab({{kSp, 0},
                                  {"x", 0},
                                  {"<", 0},
                                  {">", 0},
                                  {"s", 0},
                                  {"<s", 0},
                                  {"<|u|>", 0, TokenType::kUserDefined},
                                  {"<sep>", 5, TokenType::kControl}},
                                 true));
  const int u = Id(t, "<|u|>");
  // The user-defined piece is cut out; the text after it gets the dummy prefix again.
  EXPECT_EQ(t.Encode("x<|u|>x", false), (std::vector<int>{Id(t, kSp), Id(t, "x"), u, Id(t, kSp), Id(t, "x")}));
  EXPECT_EQ(t.Encode("<|u|>", false), (std::vector<int>{u}));
  EXPECT_EQ(t.Encode("<|u|><|u|>", false), (std::vector<int>{u, u}));
  for (const std::string s : {"x<|u|>x", "<|u|>", "<|u|> x<|u|>", "x<|u|><|u|>"}) {
    EXPECT_EQ(t.Decode(t.Encode(s, true)), s) << s;
    EXPECT_EQ(t.Encode(s, false), t.EncodeReference(s)) << s;
  }
  // "<sep>" is a control piece: the text "<s" + ... never becomes it.
  const std::vector<int> ids = t.Encode("<sep>", false);
  for (int id : ids) EXPECT_NE(id, Id(t, "<sep>"));
  EXPECT_EQ(t.Type(Id(t, "<sep>")), TokenType::kControl);
  EXPECT_EQ(t.Decode(std::vector<int>{1, Id(t, "<sep>"), 2}), "");  // control tokens decode to nothing
}

TEST(SpmTest, VocabularyErrors) {
  SpmVocab nan = MakeVocab({{kSp, 0}, {"a", std::numeric_limits<float>::quiet_NaN()}}, false);
  try {
    SpmTokenizer t(nan);
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("token 4 'a' has score NaN"), std::string::npos) << e.what();
  }
  EXPECT_THROW(SpmTokenizer(MakeVocab({{"a", 0}, {"a", 1}}, false)), ConfigError);  // duplicate
  SpmVocab bad_bos = MakeVocab({}, false);
  bad_bos.bos_id = 3;
  EXPECT_THROW(SpmTokenizer{bad_bos}, ConfigError);
  SpmVocab short_scores = MakeVocab({{"a", 0}}, false);
  short_scores.scores.pop_back();
  EXPECT_THROW(SpmTokenizer{short_scores}, ConfigError);
  EXPECT_THROW(SpmTokenizer(SpmVocab{}), ConfigError);
  // Infinite scores order merges like any other (no NaN): accepted.
  const SpmTokenizer inf(MakeVocab({{kSp, 0}, {"a", 0}, {"aa", std::numeric_limits<float>::infinity()},
                                    {"aaa", -std::numeric_limits<float>::infinity()}},
                                   true));
  EXPECT_EQ(inf.Encode("aaaa", false), inf.EncodeReference("aaaa"));
  const SpmTokenizer ok(MakeVocab({{kSp, 0}}, true));
  EXPECT_THROW(ok.Decode(std::vector<int>{0, static_cast<int>(ok.vocab_size())}), RangeError);
  EXPECT_THROW(ok.Decode(std::vector<int>{-1}), RangeError);
  EXPECT_THROW(ok.Piece(-1), RangeError);
}

// Random vocabularies over a small alphabet (multi-byte characters, "▁", ties, user-defined pieces) and random
// texts, including invalid UTF-8: the heap equals the plain loop, and decoding gives the text back.
TEST(SpmTest, HeapEqualsPlainLoopOnRandomVocabularies) {
  std::mt19937 rng(7);
  const std::vector<std::string> chars = {"a", "b", " ", kSp, "\xC3\xA9", "\xF0\x9F\x99\x82", "\xFF", "\xC3"};
  for (int v = 0; v < 150; ++v) {
    std::vector<Piece> pieces = {{kSp, 0}, {"a", 0}, {"b", 0}};
    const int n = 2 + static_cast<int>(rng() % 25);
    for (int i = 0; i < n; ++i) {
      std::string p;
      const int len = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < len; ++k) p += chars[rng() % 6];  // valid characters only in pieces
      bool dup = false;
      for (const Piece& q : pieces) dup = dup || q.text == p;
      if (dup) continue;
      // (A user-defined piece holding "▁" would match a literal U+2581 and decode it as itself.)
      const bool user_defined = rng() % 10 == 0 && p.find(kSp) == std::string::npos;
      const TokenType type = user_defined ? TokenType::kUserDefined : TokenType::kNormal;
      pieces.push_back({p, static_cast<float>(static_cast<int>(rng() % 5)) - 2.0f, type});
    }
    const SpmTokenizer t(MakeVocab(pieces, true));
    for (int k = 0; k < 20; ++k) {
      std::string text;
      const int len = static_cast<int>(rng() % 16);
      for (int c = 0; c < len; ++c) text += chars[rng() % chars.size()];
      const std::vector<int> ids = t.Encode(text, false);
      ASSERT_EQ(ids, t.EncodeReference(text)) << "vocabulary " << v << " text '" << text << "'";
      // A literal "▁" in the text decodes as a space (as sentencepiece); elsewhere the bytes come back.
      std::string expect;
      for (size_t at = 0; at < text.size();) {
        if (text.compare(at, 3, kSp) == 0) {
          expect += ' ';
          at += 3;
        } else {
          expect += text[at++];
        }
      }
      ASSERT_EQ(t.Decode(ids), expect) << "vocabulary " << v << " text '" << text << "'";
    }
  }
}

TEST(SpmTest, InvalidUtf8GoesThroughByteFallback) {
  const std::unique_ptr<Tokenizer> t = LoadTokenizer(testing::VocabGguf("llama-spm"));
  for (const std::string& s : {std::string("\xFF"), std::string("ok\xC3"), std::string("\x80\x80 x"),
                              std::string("a\xF0\x9F\x99"), std::string("\xED\xA0\x80"), std::string(1, '\0')}) {
    const std::vector<int> ids = t->Encode(s, false);
    EXPECT_EQ(t->Decode(ids), s);
  }
  // 0xFF alone: the dummy prefix, then the byte piece <0xFF>.
  EXPECT_EQ(t->Encode("\xFF", false), (std::vector<int>{29871, 0xFF + 3}));
}

}  // namespace
}  // namespace posenc
