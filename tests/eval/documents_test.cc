// Protocol step 1 (the numpy oracle's docstring): documents and the token stream.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/eval/documents.h"

namespace posenc {
namespace {

std::vector<std::string> Docs(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view d : SplitDocuments(text)) out.emplace_back(d);
  return out;
}

TEST(DocumentsTest, NoSeparatorLineMeansOneUnchangedDocument) {
  EXPECT_EQ(Docs("a\n\nb\n"), (std::vector<std::string>{"a\n\nb\n"}));
  EXPECT_EQ(Docs(""), (std::vector<std::string>{""}));
  // Not separator lines: text around it on the line, or a "\r" before the newline.
  EXPECT_EQ(Docs("x <|endoftext|>\ny"), (std::vector<std::string>{"x <|endoftext|>\ny"}));
  EXPECT_EQ(Docs("x\n<|endoftext|> y"), (std::vector<std::string>{"x\n<|endoftext|> y"}));
  EXPECT_EQ(Docs("x\n<|endoftext|>\r\ny"), (std::vector<std::string>{"x\n<|endoftext|>\r\ny"}));
}

TEST(DocumentsTest, SeparatorLinesSplitAndOneNewlineIsStrippedPerSide) {
  EXPECT_EQ(Docs("a\n<|endoftext|>\nb\n"), (std::vector<std::string>{"a", "b"}));
  // Only ONE leading / trailing newline goes: a blank line after a separator stays in the next document.
  EXPECT_EQ(Docs("a\n\n<|endoftext|>\n\nb"), (std::vector<std::string>{"a\n", "\nb"}));
  // Empty documents are kept (a final separator gives a last, empty document).
  EXPECT_EQ(Docs("a\n<|endoftext|>\n<|endoftext|>\nb\n<|endoftext|>"),
            (std::vector<std::string>{"a", "", "b", ""}));
  EXPECT_EQ(Docs("<|endoftext|>"), (std::vector<std::string>{"", ""}));
}

TEST(DocumentsTest, StreamIsBosPlusEncodePerDocument) {
  const Llama2cTokenizer& tok = testing::Tok512();
  const TokenStream s = BuildTokenStream("Once upon a time\n<|endoftext|>\n\n<|endoftext|>\nOnce", tok);
  ASSERT_EQ(s.n_documents, 3);
  std::vector<int> want = tok.Encode("Once upon a time", true, false);
  want.push_back(kBosId);  // the empty document: BOS alone, no dummy prefix
  const std::vector<int> last = tok.Encode("Once", true, false);
  want.insert(want.end(), last.begin(), last.end());
  EXPECT_EQ(s.ids, want);
}

TEST(DocumentsTest, SampleTextMatchesOracle) {
  // The oracle's notes on oracle_ppl.json: tinystories_sample_cs336.txt has 6 documents (the last one empty) and a
  // stream of 1814 tokens.
  const TokenStream s = BuildTokenStream(ReadTextFile(testing::TextPath("tinystories_sample_cs336.txt")),
                                         testing::Tok512());
  EXPECT_EQ(s.n_documents, 6);
  EXPECT_EQ(s.ids.size(), 1814u);
  EXPECT_EQ(s.ids.back(), kBosId);
}

}  // namespace
}  // namespace posenc
