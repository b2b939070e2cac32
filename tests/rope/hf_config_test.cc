// Family-specific RoPE keys of Hugging Face configs, read as the families' config classes read them (never a
// silent default base of 10000), legacy rope type names, and notes that stay short.
//
// Expected frequencies come from the families' own definitions: inv_freq_i = base^(-2i / rotary_dim), with
// GPT-NeoX's and Qwen-1's base = rotary_emb_base and ChatGLM's base = 10000 * rope_ratio over rotary_dim =
// head_dim / 2 (its RotaryEmbedding(rotary_dim // 2)); compared in double within float32 rounding (2^-23
// relative: HF forms them in float32).
#include "posenc/rope/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;

using nlohmann::json;

void ExpectBase(const HfRopeConfig& c, double base, int64_t rotary_dim) {
  EXPECT_EQ(c.params.rope_theta, base);
  ASSERT_EQ(c.params.RotaryDim(), rotary_dim);
  const RopeFrequencies f = ComputeRopeFrequencies(c.params);
  ASSERT_EQ(static_cast<int64_t>(f.inv_freq.size()), rotary_dim / 2);
  for (int64_t i = 0; i < rotary_dim / 2; ++i) {
    const double want = 1.0 / std::pow(base, 2.0 * static_cast<double>(i) / static_cast<double>(rotary_dim));
    EXPECT_NEAR(f.inv_freq[static_cast<size_t>(i)] / want, 1.0, 3e-7) << "pair " << i;
  }
}

bool HasWarning(const HfRopeConfig& c, const std::string& part) {
  for (const std::string& w : c.warnings) {
    if (w.find(part) != std::string::npos) return true;
  }
  return false;
}

// GPTNeoXConfig: rope_theta defaults to rotary_emb_base, partial_rotary_factor to rotary_pct (0.25 if absent).
TEST(HfConfigFamiliesTest, GptNeoxRotaryEmbBase) {
  const json neox = {{"model_type", "gpt_neox"},
                     {"hidden_size", 1024},
                     {"num_attention_heads", 16},
                     {"rotary_emb_base", 500000},
                     {"rotary_pct", 0.25}};
  ExpectBase(ParseHfRopeConfig(neox), 500000.0, 16);
  json no_pct = neox;
  no_pct.erase("rotary_pct");
  const HfRopeConfig c = ParseHfRopeConfig(no_pct);
  ExpectBase(c, 500000.0, 16);
  EXPECT_TRUE(HasWarning(c, "rotary_pct not given: using 0.25"));
  EXPECT_EQ(c.layout, RopeLayout::kHalfSplit);
}

// Qwen-1 (remote code): RotaryEmbedding(kv_channels * rotary_pct, base=rotary_emb_base); its dynamic NTK and
// logn attention act past seq_length and are said in notes.
TEST(HfConfigFamiliesTest, Qwen1RotaryEmbBaseAndKvChannels) {
  const json qwen = {{"model_type", "qwen"},    {"hidden_size", 8192},        {"num_attention_heads", 64},
                     {"kv_channels", 128},      {"rotary_emb_base", 1000000}, {"rotary_pct", 1.0},
                     {"use_dynamic_ntk", true}, {"use_logn_attn", true},      {"seq_length", 32768}};
  const HfRopeConfig c = ParseHfRopeConfig(qwen);
  EXPECT_EQ(c.params.head_dim, 128);
  ExpectBase(c, 1000000.0, 128);
  EXPECT_TRUE(HasWarning(c, "use_dynamic_ntk"));
  EXPECT_TRUE(HasWarning(c, "use_logn_attn"));
}

// ChatGLM2/3, GLM-4 (remote code): base = 10000 * rope_ratio, the first half of each head rotated, pairs
// (2i, 2i+1).
TEST(HfConfigFamiliesTest, ChatglmRopeRatio) {
  const json glm = {{"model_type", "chatglm"}, {"hidden_size", 4096}, {"num_attention_heads", 32},
                    {"kv_channels", 128},      {"rope_ratio", 50},    {"seq_length", 32768}};
  const HfRopeConfig c = ParseHfRopeConfig(glm);
  ExpectBase(c, 500000.0, 64);
  EXPECT_EQ(c.layout, RopeLayout::kInterleaved);
  json plain = glm;
  plain.erase("rope_ratio");
  ExpectBase(ParseHfRopeConfig(plain), 10000.0, 64);
}

// A family key on a family that does not use it, or a base given twice differently: refused, naming the key.
TEST(HfConfigFamiliesTest, UnknownOrConflictingBaseKeysAreRefused) {
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfRopeConfig(json{{"model_type", "llama"}, {"head_dim", 128}, {"rope_ratio", 50}});
      },
      {"rope_ratio = 50", "model_type is 'llama'"});
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfRopeConfig(
            json{{"model_type", "gpt_neox"}, {"head_dim", 64}, {"rope_theta", 10000}, {"rotary_emb_base", 500000}});
      },
      {"rotary_emb_base = 500000", "rope_theta = 10000"});
  ExpectThrowWith<ConfigError>(
      [] {
        ParseHfRopeConfig(json{{"model_type", "chatglm"}, {"head_dim", 128}, {"rope_ratio", -1}});
      },
      {"rope_ratio", "-1"});
}

// Phi-3's legacy rope type "su" is longrope (transformers Phi3Config maps "su" and "yarn" to "longrope").
TEST(HfConfigFamiliesTest, Phi3SuIsLongrope) {
  std::ifstream in(std::string(POSENC_SOURCE_DIR) + "/examples/configs/phi-3-mini-128k-instruct.json");
  std::stringstream ss;
  ss << in.rdbuf();
  json phi = json::parse(ss.str());
  const HfRopeConfig longrope = ParseHfRopeConfig(phi);
  ASSERT_EQ(longrope.params.rope_type, RopeType::kLongrope);
  phi["model_type"] = "phi3";
  phi["rope_scaling"]["type"] = "su";
  const HfRopeConfig su = ParseHfRopeConfig(phi);
  EXPECT_EQ(su.params.rope_type, RopeType::kLongrope);
  EXPECT_EQ(su.params.long_factor, longrope.params.long_factor);
  EXPECT_EQ(ComputeRopeFrequencies(su.params, 8192).inv_freq, ComputeRopeFrequencies(longrope.params, 8192).inv_freq);
  EXPECT_TRUE(HasWarning(su, "rope_type 'su' read as 'longrope'"));
}

// A 100 KB value of an unused key is named in a note, not echoed whole.
TEST(HfConfigFamiliesTest, LongUnusedValuesAreCutInNotes) {
  const json c = {{"head_dim", 64},
                  {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}, {"comment", std::string(100000, 'x')}}}};
  const HfRopeConfig r = ParseHfRopeConfig(c);
  ASSERT_FALSE(r.warnings.empty());
  bool found = false;
  for (const std::string& w : r.warnings) {
    EXPECT_LT(w.size(), 200u) << w.substr(0, 200);
    found = found ||
            (w.find("rope_parameters.comment") != std::string::npos && w.find("(100000 bytes)") != std::string::npos);
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace posenc
