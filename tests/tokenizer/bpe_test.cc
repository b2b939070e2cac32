// Byte-level BPE: merge order, ignore_merges, added tokens (lstrip / rstrip, control tokens never matched),
// bytes without a token, what the constructor rejects, and the heap against the plain loop on random merge
// lists and texts (invalid UTF-8 included).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/bpe.h"
#include "posenc/tokenizer/byte_level.h"
#include "posenc/tokenizer/load.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

// The 256 byte characters (ids 0..255 in byte order), then the merged tokens of `merges`, then `extra`.
BpeVocab MakeVocab(const std::vector<std::pair<std::string, std::string>>& merges,
                   const std::vector<std::string>& extra = {}) {
  BpeVocab v;
  v.source = "test vocabulary";
  const ByteLevelMap& map = ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) v.tokens.push_back(map.Char(static_cast<unsigned char>(b)));
  for (const auto& [a, b] : merges) {
    v.merges.emplace_back(map.Encode(a), map.Encode(b));
    const std::string m = map.Encode(a + b);
    bool have = false;
    for (const std::string& t : v.tokens) have = have || t == m;
    if (!have) v.tokens.push_back(m);
  }
  for (const std::string& e : extra) v.tokens.push_back(e);
  v.types.assign(v.tokens.size(), TokenType::kNormal);
  return v;
}

PreTokenizer Gpt2() { return GgufPreTokenizer("gpt-2"); }

int Id(const BpeTokenizer& t, const std::string& raw) {
  const std::string mapped = ByteLevelMap::Get().Encode(raw);
  for (int i = 0; i < t.vocab_size(); ++i) {
    if (t.Piece(i) == mapped) return i;
  }
  return -1;
}

TEST(BpeTest, MergesByRankLeftmostOnTies) {
  const BpeTokenizer t(MakeVocab({{"a", "a"}, {"b", "c"}, {"aa", "a"}}), Gpt2());
  EXPECT_EQ(t.Encode("aaa", false), (std::vector<int>{Id(t, "aaa")}));
  // "aaaa": (a,a) at 0 merges first (leftmost), then (a,a) at 2: aa aa (no merge "aa aa").
  EXPECT_EQ(t.Encode("aaaa", false), (std::vector<int>{Id(t, "aa"), Id(t, "aa")}));
  // Words never merge across the pre-tokenizer's cut: " a" and "a" are separate words in "a a".
  EXPECT_EQ(t.Encode("bc abc", false), (std::vector<int>{Id(t, "bc"), ' ', 'a', Id(t, "bc")}));
  EXPECT_EQ(t.Encode("", false), std::vector<int>{});
  EXPECT_EQ(t.Decode(t.Encode("bc abc\xFF\n", false)), "bc abc\xFF\n");
  EXPECT_THROW(t.Encode("x", true), ConfigError);  // no BOS token
}

TEST(BpeTest, IgnoreMergesTakesAWholeWordToken) {
  // "ab" is a token but no merge makes it: only ignore_merges (Llama 3) produces it.
  BpeVocab v = MakeVocab({}, {ByteLevelMap::Get().Encode("ab")});
  const BpeTokenizer plain(v, Gpt2());
  EXPECT_EQ(plain.Encode("ab", false), (std::vector<int>{'a', 'b'}));
  v.ignore_merges = true;
  const BpeTokenizer ignore(v, Gpt2());
  EXPECT_EQ(ignore.Encode("ab", false), (std::vector<int>{Id(ignore, "ab")}));
  EXPECT_EQ(ignore.Encode("ab", false), ignore.EncodeReference("ab"));
}

TEST(BpeTest, AddedTokensKeptWholeControlTokensNot) {
  BpeVocab v = MakeVocab({{"a", "b"}}, {"<|sep|>", "<|eot|>"});
  const int sep = static_cast<int>(v.tokens.size()) - 2, eot = sep + 1;
  v.types[static_cast<size_t>(sep)] = TokenType::kUserDefined;
  v.types[static_cast<size_t>(eot)] = TokenType::kControl;
  v.added = {{sep, "<|sep|>", /*lstrip=*/true, /*rstrip=*/true}};
  v.eos_id = eot;
  const BpeTokenizer t(v, Gpt2());
  // lstrip / rstrip: the spaces around the added token belong to it.
  EXPECT_EQ(t.Encode("ab  <|sep|>  ab", false), (std::vector<int>{Id(t, "ab"), sep, Id(t, "ab")}));
  EXPECT_EQ(t.Encode("<|sep|>", false), (std::vector<int>{sep}));
  // The control token's text is ordinary text.
  const std::vector<int> ids = t.Encode("<|eot|>", false);
  EXPECT_GT(ids.size(), 1u);
  for (int id : ids) EXPECT_NE(id, eot);
  EXPECT_EQ(t.Encode("ab", false, /*add_eos=*/true), (std::vector<int>{Id(t, "ab"), eot}));
  EXPECT_EQ(t.Decode(std::vector<int>{Id(t, "ab"), sep, eot}), "ab<|sep|>");  // control decodes to nothing
}

TEST(BpeTest, BytesWithoutATokenAreUnknownOrAnError) {
  BpeVocab v = MakeVocab({});
  v.tokens[0xFF] = "\xC3\xBF_not_the_byte";  // byte 0xFF's character is no longer a token
  const BpeTokenizer no_unk(v, Gpt2());
  try {
    no_unk.Encode("a\xFF", false);
    ADD_FAILURE() << "no exception";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("byte 0xFF"), std::string::npos) << e.what();
  }
  v.unk_id = 'a';
  v.types['a'] = TokenType::kUnknown;
  const BpeTokenizer with_unk(v, Gpt2());
  EXPECT_EQ(with_unk.Encode("\xFF", false), (std::vector<int>{'a'}));
  EXPECT_EQ(with_unk.Encode("\xFF", false), with_unk.EncodeReference("\xFF"));
}

TEST(BpeTest, VocabularyErrors) {
  auto expect_error = [](BpeVocab v, const std::string& part) {
    try {
      BpeTokenizer t(std::move(v), GgufPreTokenizer("gpt-2"));
      ADD_FAILURE() << "no exception, expected " << part;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  BpeVocab unknown_left = MakeVocab({{"a", "b"}});
  unknown_left.merges.push_back({"zz", "b"});
  expect_error(unknown_left, "merge 1 'zz b' names left side 'zz', which is not a token");
  BpeVocab unknown_merged = MakeVocab({});
  unknown_merged.merges.push_back({"a", "b"});
  expect_error(unknown_merged, "names merged text 'ab'");
  BpeVocab dup = MakeVocab({});
  dup.tokens[1] = dup.tokens[0];
  expect_error(dup, "are both");
  BpeVocab types = MakeVocab({});
  types.types.pop_back();
  expect_error(types, "token types");
  BpeVocab added = MakeVocab({});
  added.added = {{5000, "<x>", false, false}};
  expect_error(added, "added token '<x>' has id 5000");
  BpeVocab bos = MakeVocab({});
  bos.bos_id = 256;
  expect_error(bos, "bos_token_id must be in [0, 256), got 256");
  expect_error(BpeVocab{}, "has no tokens");
  const BpeTokenizer ok(MakeVocab({}), GgufPreTokenizer("gpt-2"));
  EXPECT_THROW(ok.Decode(std::vector<int>{256}), RangeError);
  EXPECT_THROW(ok.Decode(std::vector<int>{-3}), RangeError);
}

// Random merge lists over a small alphabet and random texts (multi-byte and invalid UTF-8, spaces, digits):
// the heap equals the plain loop and decoding gives the bytes back.
TEST(BpeTest, HeapEqualsPlainLoopOnRandomMerges) {
  std::mt19937 rng(11);
  const std::vector<std::string> chars = {"a", "b", " ", "1", "\xC3\xA9", "\xFF", "\n", "'s"};
  for (int v = 0; v < 100; ++v) {
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<std::string> formed = {"a", "b", " ", "1", "\xC3", "\xA9", "\xFF"};
    const int n = static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const std::string& x = formed[rng() % formed.size()];
      const std::string& y = formed[rng() % formed.size()];
      merges.emplace_back(x, y);  // repeats keep their first rank
      formed.push_back(x + y);
    }
    for (const char* pre : {"gpt-2", "llama-bpe", "deepseek-llm"}) {
      BpeVocab vocab = MakeVocab(merges);
      vocab.ignore_merges = rng() % 2 == 0;
      const BpeTokenizer t(std::move(vocab), GgufPreTokenizer(pre));
      for (int k = 0; k < 10; ++k) {
        std::string text;
        const int len = static_cast<int>(rng() % 14);
        for (int c = 0; c < len; ++c) text += chars[rng() % chars.size()];
        const std::vector<int> ids = t.Encode(text, false);
        ASSERT_EQ(ids, t.EncodeReference(text)) << "merges " << v << " " << pre << " text '" << text << "'";
        ASSERT_EQ(t.Decode(ids), text);
      }
    }
  }
}

TEST(BpeTest, InvalidUtf8GoesThroughTheByteMap) {
  const std::unique_ptr<Tokenizer> t = LoadTokenizer(testing::VocabGguf("gpt-2"));
  for (const std::string& s : {std::string("\xFF"), std::string("ok\xC3"), std::string("\x80\x80 x"),
                              std::string("a\xF0\x9F\x99 b"), std::string("\xED\xA0\x80"), std::string(1, '\0')}) {
    EXPECT_EQ(t->Decode(t->Encode(s, false)), s);
  }
  // Each invalid byte is a word of its own: 0xFF is the token of its byte character "ÿ" (id 187 in GPT-2).
  EXPECT_EQ(t->Encode("\xFF", false), (std::vector<int>{187}));
}

}  // namespace
}  // namespace posenc
