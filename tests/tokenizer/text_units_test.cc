// The small text units under the tokenizers: UTF-8 validation (RFC 3629), the byte-level map (GPT-2's
// bytes_to_unicode), and added-token matching (leftmost-longest, lstrip / rstrip).
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/added_tokens.h"
#include "posenc/tokenizer/byte_level.h"
#include "posenc/tokenizer/utf8.h"

namespace posenc {
namespace {

TEST(Utf8Test, ValidSequencesPerRfc3629) {
  EXPECT_EQ(ValidUtf8Length("a", 0), 1u);
  EXPECT_EQ(ValidUtf8Length("\xC3\xA9", 0), 2u);
  EXPECT_EQ(ValidUtf8Length("\xE2\x96\x81", 0), 3u);
  EXPECT_EQ(ValidUtf8Length("\xF0\x9F\x99\x82", 0), 4u);
  EXPECT_EQ(ValidUtf8Length("\xF4\x8F\xBF\xBF", 0), 4u);  // U+10FFFF
  for (const std::string bad : {"\x80", "\xC0\xAF", "\xC1\xBF", "\xC3", "\xC3x", "\xE0\x80\x80", "\xED\xA0\x80",
                                "\xF0\x80\x80\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80", "\xFF"}) {
    EXPECT_EQ(ValidUtf8Length(bad, 0), 0u) << bad;
  }
  EXPECT_EQ(ValidUtf8Prefix("ab\xC3\xA9x\xFFyz"), 5u);
  EXPECT_EQ(Utf8LeadLength(0xF0), 4u);
  EXPECT_EQ(Utf8LeadLength(0x80), 1u);
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x2581u, 0x1F642u}) AppendUtf8(cp, s);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x96\x81\xF0\x9F\x99\x82");
  EXPECT_EQ(DecodeUtf8(s, 6, 4), 0x1F642u);
  EXPECT_TRUE(IsUnicodeWhitespace(0x3000));
  EXPECT_FALSE(IsUnicodeWhitespace(0x200B));  // zero-width space is not White_Space
}

TEST(ByteLevelTest, GptTwoTable) {
  const ByteLevelMap& map = ByteLevelMap::Get();
  EXPECT_EQ(map.Char(' '), "\xC4\xA0");   // Ġ U+0120
  EXPECT_EQ(map.Char('\n'), "\xC4\x8A");  // Ċ U+010A
  EXPECT_EQ(map.Char('a'), "a");
  EXPECT_EQ(map.Char(0xAD), "\xC5\x83");  // the last non-printable byte -> U+0143
  EXPECT_EQ(map.Char(0xFF), "\xC3\xBF");
  std::set<std::string> distinct;
  std::string all;
  for (int b = 0; b < 256; ++b) {
    distinct.insert(map.Char(static_cast<unsigned char>(b)));
    all += static_cast<char>(b);
  }
  EXPECT_EQ(distinct.size(), 256u);
  std::string back;
  ASSERT_TRUE(map.Decode(map.Encode(all), back));
  EXPECT_EQ(back, all);
  std::string out;
  EXPECT_FALSE(map.Decode("\xE2\x96\x81", out));  // U+2581 stands for no byte
  EXPECT_FALSE(map.Decode("\xFF", out));
}

TEST(AddedTokensTest, LeftmostLongestAndStrip) {
  const AddedTokenMatcher m({{10, "<a>", false, false}, {11, "<a><b>", false, false}, {12, "b", true, true}});
  using Seg = AddedTokenMatcher::Segment;
  auto split = [&](const std::string& s) {
    std::vector<std::vector<int64_t>> out;
    for (const Seg& g : m.Split(s)) out.push_back({g.id, static_cast<int64_t>(g.begin), static_cast<int64_t>(g.end)});
    return out;
  };
  EXPECT_EQ(split("x<a><b>y"), (std::vector<std::vector<int64_t>>{{-1, 0, 1}, {11, 1, 7}, {-1, 7, 8}}));
  EXPECT_EQ(split("<a>"), (std::vector<std::vector<int64_t>>{{10, 0, 3}}));
  // "b" strips the whitespace around it (a no-break space U+00A0 too), but not into the token before it.
  EXPECT_EQ(split("x \xC2\xA0 b  y"), (std::vector<std::vector<int64_t>>{{-1, 0, 1}, {12, 1, 8}, {-1, 8, 9}}));
  EXPECT_EQ(split("<a> b"), (std::vector<std::vector<int64_t>>{{10, 0, 3}, {12, 3, 5}}));
  EXPECT_TRUE(m.Split("").empty());
  EXPECT_THROW(AddedTokenMatcher({{1, "", false, false}}), ConfigError);
}

}  // namespace
}  // namespace posenc
