// tokenizer.json: a small byte-level BPE file read field by field (merges in both layouts, added tokens,
// pre-tokenizers, BOS / EOS from the post-processor and tokenizer_config.json), and every file it must refuse
// with a message naming the field.
#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/tokenizer/byte_level.h"
#include "posenc/tokenizer/hf_tokenizer_json.h"

namespace posenc {
namespace {

using nlohmann::json;

// The 256 byte characters (ids in byte order), "ab" (256), "Ġab" (257), merges a+b then Ġ+ab; added tokens
// "<s>" (258, special) and "<sep>" (259, not special).
json SmallTokenizer() {
  json vocab = json::object();
  const ByteLevelMap& map = ByteLevelMap::Get();
  for (int b = 0; b < 256; ++b) vocab[map.Char(static_cast<unsigned char>(b))] = b;
  vocab["ab"] = 256;
  vocab["\xC4\xA0" "ab"] = 257;
  vocab["<s>"] = 258;
  vocab["<sep>"] = 259;
  return {{"version", "1.0"},
          {"added_tokens",
           {{{"id", 258}, {"content", "<s>"}, {"special", true}, {"single_word", false}, {"lstrip", false},
             {"rstrip", false}, {"normalized", false}},
            {{"id", 259}, {"content", "<sep>"}, {"special", false}, {"single_word", false}, {"lstrip", false},
             {"rstrip", false}, {"normalized", true}}}},
          {"normalizer", nullptr},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
          {"post_processor", nullptr},
          {"model",
           {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"vocab", vocab},
            {"merges", {"a b", "\xC4\xA0 ab"}}}}};
}

std::unique_ptr<BpeTokenizer> Load(const json& j, const std::string& config = "") {
  return LoadHfTokenizerJson(j.dump(), "tokenizer.json", config);
}

void ExpectError(const json& j, const std::string& part, const std::string& config = "") {
  try {
    Load(j, config);
    ADD_FAILURE() << "no exception, expected one containing: " << part;
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
  }
}

TEST(HfTokenizerJsonTest, ReadsASmallByteLevelBpe) {
  const std::unique_ptr<BpeTokenizer> t = Load(SmallTokenizer());
  EXPECT_EQ(t->vocab_size(), 260);
  EXPECT_EQ(t->Encode("ab ab", false), (std::vector<int>{256, 257}));
  EXPECT_EQ(t->Encode("ab<sep> ab", false), (std::vector<int>{256, 259, 257}));  // added token kept whole
  EXPECT_EQ(t->Encode("<s>", false), (std::vector<int>{'<', 's', '>'}));          // special: plain text
  EXPECT_EQ(t->Type(258), TokenType::kControl);
  EXPECT_EQ(t->Type(259), TokenType::kUserDefined);
  EXPECT_EQ(t->bos_id(), -1);
  EXPECT_FALSE(t->add_bos_default());
  // Merges as pairs (tokenizers >= 0.20) read the same.
  json pairs = SmallTokenizer();
  pairs["model"]["merges"] = json::array({json::array({"a", "b"}), json::array({"\xC4\xA0", "ab"})});
  EXPECT_EQ(Load(pairs)->Encode("ab ab", false), (std::vector<int>{256, 257}));
}

TEST(HfTokenizerJsonTest, BosEosFromThePostProcessorAndTheConfig) {
  json j = SmallTokenizer();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {258}}, {"tokens", {"<s>"}}}}}}};
  const std::unique_ptr<BpeTokenizer> t = Load(j);
  EXPECT_EQ(t->bos_id(), 258);
  EXPECT_TRUE(t->add_bos_default());
  EXPECT_EQ(t->Encode("ab", true), (std::vector<int>{258, 256}));
  EXPECT_EQ(t->Decode(t->Encode("ab", true)), "ab");
  const std::unique_ptr<BpeTokenizer> c =
      Load(SmallTokenizer(), R"({"bos_token": {"content": "<s>"}, "eos_token": "<sep>", "add_bos_token": true})");
  EXPECT_EQ(c->bos_id(), 258);
  EXPECT_EQ(c->eos_id(), 259);
  EXPECT_TRUE(c->add_bos_default());
  ExpectError(SmallTokenizer(), "bos_token 'nope' is not a token", R"({"bos_token": "nope"})");
}

TEST(HfTokenizerJsonTest, PreTokenizerKinds) {
  json j = SmallTokenizer();
  j["pre_tokenizer"] = {{"type", "Sequence"},
                        {"pretokenizers",
                         {{{"type", "Split"}, {"pattern", {{"String", "|"}}}, {"behavior", "Removed"}},
                          {{"type", "Digits"}, {"individual_digits", true}},
                          {{"type", "Punctuation"}, {"behavior", "Contiguous"}},
                          {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  const std::unique_ptr<BpeTokenizer> t = Load(j);
  // "|" is removed; each word gets a prefix space; "ab" merges into "Ġab".
  EXPECT_EQ(t->Encode("ab|ab", false), (std::vector<int>{257, 257}));
  EXPECT_EQ(t->Decode(t->Encode("12", false)), " 1 2");
  ExpectError([] {
    json k = SmallTokenizer();
    k["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\xE2\x96\x81"}};
    return k;
  }(), "Metaspace");
  ExpectError([] {
    json k = SmallTokenizer();
    k["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    return k;
  }(), "type 'BertPreTokenizer' is not supported");
  ExpectError([] {
    json k = SmallTokenizer();
    k["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}};
    return k;
  }(), "0 ByteLevel steps");
  ExpectError([] {
    json k = SmallTokenizer();
    k["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers",
                           {{{"type", "Split"}, {"pattern", {{"Regex", "(bad"}}}, {"behavior", "Isolated"}},
                            {{"type", "ByteLevel"}}}}};
    return k;
  }(), "does not compile");
  ExpectError([] {
    json k = SmallTokenizer();
    k["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "x"}}}, {"behavior", "Sideways"}};
    return k;
  }(), "behavior must be Isolated");
}

TEST(HfTokenizerJsonTest, UnsupportedModelsAreClearErrors) {
  for (const char* type : {"WordPiece", "Unigram", "WordLevel"}) {
    json j = SmallTokenizer();
    j["model"]["type"] = type;
    ExpectError(j, std::string("model.type '") + type + "' is not supported");
  }
  json fallback = SmallTokenizer();
  fallback["model"]["byte_fallback"] = true;
  ExpectError(fallback, "byte_fallback");
  json dropout = SmallTokenizer();
  dropout["model"]["dropout"] = 0.1;
  ExpectError(dropout, "model.dropout 0.1 is not supported");
  json suffix = SmallTokenizer();
  suffix["model"]["end_of_word_suffix"] = "</w>";
  ExpectError(suffix, "end_of_word_suffix");
  json single = SmallTokenizer();
  single["added_tokens"][1]["single_word"] = true;
  ExpectError(single, "added_tokens[1].single_word true is not supported");
  json lower = SmallTokenizer();
  lower["normalizer"] = {{"type", "Lowercase"}};
  ExpectError(lower, "normalizer");
}

// The NFC normalizer is applied to the text between added tokens: "e" U+0301 (decomposed) tokenizes as U+00E9
// (Unicode's canonical composition), an invalid byte stays a byte, and without the normalizer nothing changes.
TEST(HfTokenizerJsonTest, NfcNormalizerIsApplied) {
  auto byte_ids = [&](std::string_view bytes) {
    std::vector<int> ids;
    for (const char c : bytes) ids.push_back(static_cast<unsigned char>(c));  // SmallTokenizer: id = byte
    return ids;
  };
  json nfc = SmallTokenizer();
  nfc["normalizer"] = {{"type", "NFC"}};
  const std::unique_ptr<BpeTokenizer> t = Load(nfc);
  EXPECT_EQ(t->Encode("e\xCC\x81", false), byte_ids("\xC3\xA9"));
  EXPECT_EQ(t->Encode("\xFF" "e\xCC\x81<sep>ab", false),
            (std::vector<int>{0xFF, 0xC3, 0xA9, 259, 256}));
  EXPECT_NE(t->Describe().find("normalizer NFC"), std::string::npos) << t->Describe();
  EXPECT_EQ(Load(SmallTokenizer())->Encode("e\xCC\x81", false), byte_ids("e\xCC\x81"));
}

// parse_special: special added tokens written in the text become their ids (HF's tokenizer(text)), with their
// lstrip / rstrip; off by default.
TEST(HfTokenizerJsonTest, ParseSpecialMatchesSpecialAddedTokens) {
  json j = SmallTokenizer();
  j["added_tokens"][0]["lstrip"] = true;
  std::unique_ptr<BpeTokenizer> t = Load(j);
  EXPECT_EQ(t->Encode("ab <s>ab", false), (std::vector<int>{256, ' ', '<', 's', '>', 256}));  // id = byte
  t->set_parse_special(true);
  EXPECT_EQ(t->Encode("ab <s>ab", false), (std::vector<int>{256, 258, 256}));  // lstrip took the space
  EXPECT_EQ(t->Encode("<s><sep>", false), (std::vector<int>{258, 259}));
}

TEST(HfTokenizerJsonTest, BadIdsAndMergesAreErrors) {
  json gap = SmallTokenizer();
  gap["model"]["vocab"].erase("ab");
  ExpectError(gap, "no token has id 256");
  json twice = SmallTokenizer();
  twice["model"]["vocab"]["zz"] = 5;
  ExpectError(twice, "gives id 5 to both");
  json negative = SmallTokenizer();
  negative["model"]["vocab"]["zz"] = -1;
  ExpectError(negative, "must be a token id");
  json huge = SmallTokenizer();
  huge["model"]["vocab"]["zz"] = 1e15;
  ExpectError(huge, "must be an integer token id");
  json unknown = SmallTokenizer();
  unknown["model"]["merges"].push_back("q zz");
  ExpectError(unknown, "merge 2 'q zz' names right side 'zz', which is not a token");
  json malformed = SmallTokenizer();
  malformed["model"]["merges"].push_back("abc");
  ExpectError(malformed, "model.merges[2] must be two tokens separated by one space");
  json no_merges = SmallTokenizer();
  no_merges["model"].erase("merges");
  ExpectError(no_merges, "model.merges is missing");
  json empty_added = SmallTokenizer();
  empty_added["added_tokens"][1]["content"] = "";
  ExpectError(empty_added, "added_tokens[1].content must be non-empty");
}

TEST(HfTokenizerJsonTest, NotJsonOrTooDeepIsAnError) {
  EXPECT_THROW(LoadHfTokenizerJson("{\"model\": ", "t.json"), IoError);
  EXPECT_THROW(LoadHfTokenizerJson("[1, 2]", "t.json"), ConfigError);
  EXPECT_THROW(LoadHfTokenizerJson("", "t.json"), IoError);
  // 60000 nested arrays (120 KB) stop at the depth limit: no stack overflow.
  const std::string deep = "{\"model\": " + std::string(60000, '[') + std::string(60000, ']') + "}";
  try {
    LoadHfTokenizerJson(deep, "deep.json");
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("limit of 64"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Load(SmallTokenizer(), std::string(60000, '[')), IoError);  // tokenizer_config.json too
}

}  // namespace
}  // namespace posenc
