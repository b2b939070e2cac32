// NFC: canonical composition on examples whose NFC forms the Unicode Standard fixes (UAX #15 and the
// UnicodeData decompositions), ASCII untouched, invalid bytes kept in place.
#include <gtest/gtest.h>

#include <string>

#include "posenc/tokenizer/normalize.h"

namespace posenc {
namespace {

TEST(NormalizeNfcTest, ComposesAsTheStandardSays) {
  EXPECT_EQ(NormalizeNfc("caf" "e\xCC\x81"), "caf\xC3\xA9");                 // e + U+0301 -> U+00E9
  EXPECT_EQ(NormalizeNfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");       // Hangul L+V -> U+AC00
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xAB"), "\xC3\x85");                       // ANGSTROM SIGN -> U+00C5
  EXPECT_EQ(NormalizeNfc("\xE2\x84\xA6"), "\xCE\xA9");                       // OHM SIGN -> GREEK OMEGA
  // Canonical ordering: dot below (ccc 220) goes before dot above (ccc 230), then q has no composite.
  EXPECT_EQ(NormalizeNfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");
  // A composition exclusion stays decomposed: U+0958 DEVANAGARI QA is U+0915 U+093C in NFC.
  EXPECT_EQ(NormalizeNfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");
  // NFC is not NFKC: the ligature U+FB01 stays.
  EXPECT_EQ(NormalizeNfc("\xEF\xAC\x81"), "\xEF\xAC\x81");
}

TEST(NormalizeNfcTest, AsciiAndInvalidBytes) {
  EXPECT_EQ(NormalizeNfc(""), "");
  EXPECT_EQ(NormalizeNfc("plain ASCII text\n"), "plain ASCII text\n");
  // Each valid run is normalized on its own; a byte outside any valid sequence is kept where it was.
  EXPECT_EQ(NormalizeNfc("e\xCC\x81\xFF" "e\xCC\x81"), "\xC3\xA9\xFF\xC3\xA9");
  EXPECT_EQ(NormalizeNfc("\xC3"), "\xC3");                 // a truncated sequence
  EXPECT_EQ(NormalizeNfc("a\xED\xA0\x80z"), "a\xED\xA0\x80z");  // an encoded surrogate (invalid in UTF-8)
  const std::string nul("a\0e\xCC\x81", 5);
  EXPECT_EQ(NormalizeNfc(nul), std::string("a\0\xC3\xA9", 4));  // NUL is a character, not an end
}

}  // namespace
}  // namespace posenc
