// JSON model configs: a full config, defaults, and errors naming the key.
#include "posenc/train/config_json.h"

#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

TEST(TrainConfigJsonTest, ReadsEveryKeyAndRoundTrips) {
  const nlohmann::json j = nlohmann::json::parse(R"({"dim": 64, "hidden_dim": 172, "n_layers": 5, "n_heads": 8,
      "n_kv_heads": 4, "vocab_size": 512, "max_seq_len": 256, "position_encoding": "learned", "norm_eps": 1e-6,
      "attention_bias": true, "tied_embeddings": false, "head_dim": 8, "rope_theta": 500000})");
  const TrainShape c = TrainShapeFromJson(j);
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.max_seq_len, 256);
  EXPECT_EQ(c.position_encoding, PositionEncoding::kLearned);
  EXPECT_EQ(c.norm_eps, 1e-6);
  EXPECT_TRUE(c.attention_bias);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_theta, 500000.0);
  const TrainShape back = TrainShapeFromJson(TrainShapeToJson(c));
  EXPECT_EQ(TrainShapeToJson(back), TrainShapeToJson(c));
  nlohmann::json minimal = j;
  for (const char* k : {"position_encoding", "norm_eps", "attention_bias", "tied_embeddings", "head_dim", "rope_theta"}) {
    minimal.erase(k);
  }
  const TrainShape d = TrainShapeFromJson(minimal);
  EXPECT_EQ(d.position_encoding, PositionEncoding::kRope);
  EXPECT_TRUE(d.tied_embeddings);
  EXPECT_EQ(d.norm_eps, 1e-5);
  EXPECT_EQ(d.rope_theta, 10000.0);
  EXPECT_FALSE(d.qk_norm);
  EXPECT_FALSE(TrainShapeToJson(d).contains("qk_norm"));  // the keys of states written before it stay the same
}

TEST(TrainConfigJsonTest, QkNormBuildsAQwen3ModelConfig) {
  nlohmann::json j = nlohmann::json::parse(R"({"dim": 32, "hidden_dim": 64, "n_layers": 2, "n_heads": 4,
      "n_kv_heads": 2, "vocab_size": 64, "max_seq_len": 16, "qk_norm": true})");
  const TrainShape c = TrainShapeFromJson(j);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_EQ(TrainShapeToJson(c)["qk_norm"], true);
  const ModelConfig m = ToModelConfig(c, 16);
  EXPECT_EQ(m.qk_norm, QkNorm::kPerHead);
  EXPECT_EQ(m.architecture, "qwen3");
  EXPECT_EQ(m.head_dim, 8);
  EXPECT_NO_THROW(CheckTrainable(m, "model.json"));
  j["qk_norm"] = "yes";
  EXPECT_THROW(TrainShapeFromJson(j), ConfigError);
}

TEST(TrainConfigJsonTest, ErrorsNameTheKey) {
  auto message = [](const std::string& text) {
    try {
      TrainShapeFromJson(nlohmann::json::parse(text));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string base = R"("dim": 64, "hidden_dim": 172, "n_layers": 5, "n_heads": 8, "n_kv_heads": 4, "vocab_size": 512)";
  EXPECT_NE(message("{" + base + "}").find("missing required key 'max_seq_len'"), std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8, "position_encodings": "rope"})").find("unknown key 'position_encodings'"),
            std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8.5})").find("max_seq_len must be an integer"), std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8, "position_encoding": "alibi"})").find("'alibi'"), std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8, "tied_embeddings": 1})").find("tied_embeddings must be true or false"),
            std::string::npos);
  EXPECT_NE(message("[1]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8, "rope_theta": "big"})").find("rope_theta must be a number"),
            std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 8, "rope_theta": 1})").find("rope_theta must be finite and > 1, got 1"),
            std::string::npos);
  EXPECT_NE(message("{" + base + R"(, "max_seq_len": 0})").find("max_seq_len must be >= 1, got 0"), std::string::npos);
}

}  // namespace
}  // namespace posenc
