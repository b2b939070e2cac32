// Bounded JSON reading: nesting past the limit is refused with the depth and the limit, without recursion
// (60,000 nested '[' crashed `posenc inspect --config` with a stack overflow); long values are cut in
// messages.
#include "posenc/io/json_read.h"

#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"

namespace posenc {
namespace {

std::string Nested(int depth, const std::string& open, const std::string& close, const std::string& inner = "1") {
  std::string s;
  for (int i = 0; i < depth; ++i) s += open;
  s += inner;
  for (int i = 0; i < depth; ++i) s += close;
  return s;
}

void ExpectTooDeep(const std::string& text) {
  try {
    ParseJsonBounded(text, "test input");
    ADD_FAILURE() << "accepted";
  } catch (const IoError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("test input"), std::string::npos) << m;
    EXPECT_NE(m.find("nesting depth exceeds the limit of 64"), std::string::npos) << m;
  }
}

TEST(JsonReadTest, DeepArraysAndObjectsAreRefused) {
  ExpectTooDeep(Nested(60000, "[", "]"));
  ExpectTooDeep(Nested(60000, "{\"a\":", "}"));
  ExpectTooDeep(Nested(65, "[", "]"));
  ExpectTooDeep(Nested(60000, "[", ""));  // unterminated: still the depth, not a crash
}

TEST(JsonReadTest, DepthUpToTheLimitIsAccepted) {
  const nlohmann::json j = ParseJsonBounded(Nested(kMaxJsonDepth, "[", "]"), "test input");
  const nlohmann::json* v = &j;
  int depth = 0;
  while (v->is_array()) {
    v = &(*v)[0];
    ++depth;
  }
  EXPECT_EQ(depth, kMaxJsonDepth);
  EXPECT_EQ(*v, 1);
}

TEST(JsonReadTest, BracketsInsideStringsDoNotCount) {
  const std::string brackets(100000, '[');
  const nlohmann::json j = ParseJsonBounded("{\"k\": \"" + brackets + "\\\"[\"}", "test input");
  EXPECT_EQ(j.at("k").get<std::string>().size(), brackets.size() + 2);
}

TEST(JsonReadTest, SyntaxErrorsNameTheSource) {
  EXPECT_THROW(ParseJsonBounded("{\"a\": }", "x.json"), IoError);
  try {
    ParseJsonBounded("[1, 2", "x.json");
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json is not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(JsonReadTest, DuplicateKeysAreRefusedOnRequest) {
  const std::string text = R"({"a": 1, "b": {"x": 1, "x": 2}})";
  EXPECT_EQ(ParseJsonBounded(text, "x.json").at("b").at("x"), 2);  // by default the last wins, as in nlohmann-json
  try {
    ParseJsonBounded(text, "x.json", kMaxJsonDepth, /*refuse_duplicate_keys=*/true);
    ADD_FAILURE() << "accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json: duplicate key 'x'"), std::string::npos) << e.what();
  }
  // The same key in different objects, and in an object after a nested one closes, is no duplicate.
  const nlohmann::json j =
      ParseJsonBounded(R"({"a": [1, {"b": 2}], "c": {"a": 3}, "b": 4})", "x.json", kMaxJsonDepth, true);
  EXPECT_EQ(j.at("c").at("a"), 3);
  EXPECT_EQ(j.at("b"), 4);
  // A long duplicate key is cut in the message.
  const std::string key(1000, 'k');
  try {
    ParseJsonBounded("{\"" + key + "\": 1, \"" + key + "\": 2}", "x.json", kMaxJsonDepth, true);
    ADD_FAILURE() << "accepted";
  } catch (const IoError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
  }
}

TEST(JsonReadTest, SnippetsAreCut) {
  const nlohmann::json big = std::string(10 << 20, 'x');
  const std::string cut = JsonSnippet(big);
  EXPECT_LT(cut.size(), 120u);
  EXPECT_NE(cut.find("(10485760 bytes)"), std::string::npos) << cut;
  EXPECT_EQ(JsonSnippet(nlohmann::json{1, 2}), "[1,2]");
  const std::string list = JsonSnippet(nlohmann::json(std::vector<int>(1000, 7)));
  EXPECT_LT(list.size(), 120u);
  EXPECT_NE(list.find("(2001 bytes)"), std::string::npos) << list;
}

// The config reader goes through the bounded parse: the 60,000-deep file is an IoError, not a crash.
TEST(JsonReadTest, DeepConfigFileIsAnError) {
  const std::string path = ::testing::TempDir() + "/posenc_deep_config.json";
  {
    FILE* f = std::fopen(path.c_str(), "w");
    const std::string text = Nested(60000, "[", "]");
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  EXPECT_THROW(LoadHfRopeConfig(path), IoError);
  std::remove(path.c_str());
}

}  // namespace
}  // namespace posenc
