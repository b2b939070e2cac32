// Model config: names of the position encodings and validation messages.
#include "posenc/train/config.h"

#include <gtest/gtest.h>

#include <string>

#include "posenc/core/errors.h"

namespace posenc {
namespace {

TEST(TrainShapeTest, PositionEncodingNamesRoundTrip) {
  for (PositionEncoding p : {PositionEncoding::kRope, PositionEncoding::kSinusoidal, PositionEncoding::kLearned,
                             PositionEncoding::kNone}) {
    EXPECT_EQ(ParsePositionEncoding(PositionEncodingName(p)), p);
  }
  try {
    ParsePositionEncoding("alibi");
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("'alibi'"), std::string::npos) << e.what();
  }
}

TEST(TrainShapeTest, ValidationNamesFieldAndValue) {
  auto message = [](TrainShape c) {
    try {
      ValidateTrainShape(c);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TrainShape c = Stories260KConfig();
  EXPECT_EQ(message(c), "no error");
  EXPECT_EQ(c.resolved_head_dim(), 8);
  EXPECT_EQ(c.kv_dim(), 32);
  // stories260K: 5 x (64 x (64 + 2 x 32) + 64 x 64 + 3 x 64 x 172 + 2 x 64) + 64 + 512 x 64 = 260,032, the floats
  // of data/stories260K.bin ((1,056,540 bytes - 28 of header) / 4) less its legacy RoPE tables (512 x 4 x 2).
  EXPECT_EQ(TrainShapeParameterCount(c), 260032);
  TrainShape huge = c;
  huge.n_layers = int64_t{1} << 30;  // 2^30 layers: far more than any machine's memory
  EXPECT_NE(message(huge).find("n_layers 1073741824"), std::string::npos) << message(huge);
  EXPECT_NE(message(huge).find("weights, gradients and two AdamW moments"), std::string::npos) << message(huge);
  TrainShape bad = c;
  bad.n_kv_heads = 3;
  EXPECT_NE(message(bad).find("n_heads (8) must be a multiple of n_kv_heads (3)"), std::string::npos);
  bad = c;
  bad.vocab_size = 0;
  EXPECT_NE(message(bad).find("vocab_size must be >= 1, got 0"), std::string::npos);
  bad = c;
  bad.n_heads = 6;
  bad.n_kv_heads = 3;
  EXPECT_NE(message(bad).find("dim (64) must be a multiple of n_heads (6)"), std::string::npos);
  bad.head_dim = 10;  // an explicit head_dim need not divide dim
  EXPECT_EQ(message(bad), "no error");
  bad = c;
  bad.norm_eps = -1;
  EXPECT_NE(message(bad).find("norm_eps"), std::string::npos);
}

}  // namespace
}  // namespace posenc
