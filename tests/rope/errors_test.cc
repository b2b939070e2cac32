// One test per bad-input error of the RoPE library and the config parser: the right exception type, and a
// message naming the field and the value.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "posenc/attention/softmax_scale.h"
#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/position_ids.h"

namespace posenc {
namespace {

using nlohmann::json;

struct ErrorCase {
  std::string name;
  std::function<void()> call;
  enum Kind { kConfig, kShape, kRange, kIo } kind;
  std::vector<std::string> mentions;  // substrings the message must contain
};

RopeParams Valid() {
  RopeParams p;
  p.head_dim = 64;
  return p;
}

RopeParams With(std::function<void(RopeParams&)> edit) {
  RopeParams p = Valid();
  edit(p);
  return p;
}

void Freqs(const RopeParams& p) { ComputeRopeFrequencies(p); }

std::vector<ErrorCase> Cases() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  static std::vector<float> buf(64, 0.0f);
  static const CosSinTable table = ComputeCosSin(ComputeRopeFrequencies(Valid()), std::vector<int64_t>{0, 1});
  const std::vector<int64_t> one{0};
  auto x1 = [] { return HeadsView::Contiguous(buf.data(), 1, 1, 64); };
  return {
      {"HeadDimZero", [] { Freqs(With([](RopeParams& p) { p.head_dim = 0; })); }, ErrorCase::kConfig, {"head_dim", "0"}},
      {"RotaryDimOdd", [] { Freqs(With([](RopeParams& p) { p.rotary_dim = 7; })); }, ErrorCase::kConfig,
       {"rotary_dim", "7"}},
      {"RotaryDimTooLarge", [] { Freqs(With([](RopeParams& p) { p.rotary_dim = 128; })); }, ErrorCase::kConfig,
       {"rotary_dim", "128", "head_dim"}},
      {"RopeThetaNaN", [nan] { Freqs(With([nan](RopeParams& p) { p.rope_theta = nan; })); }, ErrorCase::kConfig,
       {"rope_theta", "nan"}},
      {"RopeThetaNegative", [] { Freqs(With([](RopeParams& p) { p.rope_theta = -5; })); }, ErrorCase::kConfig,
       {"rope_theta", "-5"}},
      {"MaxPositionNegative", [] { Freqs(With([](RopeParams& p) { p.max_position_embeddings = -1; })); },
       ErrorCase::kConfig, {"max_position_embeddings", "-1"}},
      {"LinearWithoutFactor", [] { Freqs(With([](RopeParams& p) { p.rope_type = RopeType::kLinear; })); },
       ErrorCase::kConfig, {"factor", "linear"}},
      {"FactorBelowOne",
       [] { Freqs(With([](RopeParams& p) { p.rope_type = RopeType::kLinear; p.factor = 0.5; })); },
       ErrorCase::kConfig, {"factor", "0.5"}},
      {"FactorNaN",
       [nan] { Freqs(With([nan](RopeParams& p) { p.rope_type = RopeType::kNtk; p.factor = nan; })); },
       ErrorCase::kConfig, {"factor", "nan"}},
      {"DynamicWithoutMaxPosition",
       [] { Freqs(With([](RopeParams& p) { p.rope_type = RopeType::kDynamic; p.factor = 2; })); },
       ErrorCase::kConfig, {"max_position_embeddings", "dynamic"}},
      {"YarnWithoutOriginal",
       [] { Freqs(With([](RopeParams& p) { p.rope_type = RopeType::kYarn; p.factor = 4; })); }, ErrorCase::kConfig,
       {"original_max_position_embeddings", "yarn"}},
      {"YarnNegativeBeta",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kYarn;
           p.factor = 4;
           p.original_max_position_embeddings = 4096;
           p.beta_fast = -32;
         }));
       },
       ErrorCase::kConfig, {"beta_fast", "-32"}},
      {"YarnZeroAttentionFactor",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kYarn;
           p.factor = 4;
           p.original_max_position_embeddings = 4096;
           p.attention_factor = 0.0;
         }));
       },
       ErrorCase::kConfig, {"attention_factor", "0"}},
      {"Llama3WithoutLowFreqFactor",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLlama3;
           p.factor = 8;
           p.original_max_position_embeddings = 8192;
           p.high_freq_factor = 4;
         }));
       },
       ErrorCase::kConfig, {"low_freq_factor", "llama3"}},
      {"Llama3HighNotAboveLow",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLlama3;
           p.factor = 8;
           p.original_max_position_embeddings = 8192;
           p.low_freq_factor = 4;
           p.high_freq_factor = 4;
         }));
       },
       ErrorCase::kConfig, {"high_freq_factor", "4"}},
      {"LongropeWrongListLength",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLongrope;
           p.original_max_position_embeddings = 4096;
           p.factor = 32;
           p.short_factor.assign(31, 1.0);
           p.long_factor.assign(32, 1.0);
         }));
       },
       ErrorCase::kConfig, {"short_factor", "32", "31"}},
      {"LongropeNonPositiveEntry",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLongrope;
           p.original_max_position_embeddings = 4096;
           p.factor = 32;
           p.short_factor.assign(32, 1.0);
           p.long_factor.assign(32, 1.0);
           p.long_factor[5] = 0.0;
         }));
       },
       ErrorCase::kConfig, {"long_factor[5]", "0"}},
      {"UnknownRopeType", [] { ParseRopeType("su"); }, ErrorCase::kConfig, {"rope_type", "'su'"}},
      {"SeqLenZero", [] { ComputeRopeFrequencies(Valid(), 0); }, ErrorCase::kRange, {"seq_len", "0"}},
      {"PositionBeyond2To40",
       [] { ComputeCosSin(ComputeRopeFrequencies(Valid()), std::vector<int64_t>{int64_t{1} << 41}); },
       ErrorCase::kRange, {"position_ids[0]", "2199023255552"}},
      {"CacheNegativePosition",
       [] {
         RopeCache c(ComputeRopeFrequencies(Valid()));
         c.Covering(std::vector<int64_t>{4, -2});
       },
       ErrorCase::kRange, {"position_ids[1]", "-2"}},
      {"CacheEmptyFrequencies", [] { RopeCache c(RopeFrequencies{}); }, ErrorCase::kShape, {"inv_freq"}},
      {"ApplyRotaryDimAboveHeadDim",
       [x1] {
         const CosSinTable big = ComputeCosSin(ComputeRopeFrequencies(With([](RopeParams& p) { p.head_dim = 128; })),
                                               std::vector<int64_t>{0});
         ApplyRope(x1(), std::vector<int64_t>{0}, View(big), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"rotary_dim = 128", "head_dim = 64"}},
      {"ApplyNullData",
       [] {
         ApplyRope(HeadsView::Contiguous(static_cast<float*>(nullptr), 1, 1, 64), std::vector<int64_t>{0},
                   View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"data is null"}},
      {"ApplyOverlappingHeads",
       [] {
         ApplyRope(HeadsView{buf.data(), DType::kF32, 1, 2, 32, 64, 16}, std::vector<int64_t>{0},
                   View(ComputeCosSin(ComputeRopeFrequencies(With([](RopeParams& p) { p.head_dim = 32; })),
                                      std::vector<int64_t>{0})),
                   RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"head_stride = 16"}},
      {"ApplyOverlappingTokens",  // token 1's head 0 starts inside token 0's head 1
       [] {
         ApplyRope(HeadsView{buf.data(), DType::kF32, 2, 2, 16, 31, 16}, std::vector<int64_t>{0, 1},
                   View(ComputeCosSin(ComputeRopeFrequencies(With([](RopeParams& p) { p.head_dim = 16; })),
                                      std::vector<int64_t>{0, 1})),
                   RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"token_stride = 31", "head_stride = 16", "overlap"}},
      {"ApplyRowsCountMismatch",
       [x1] { ApplyRope(x1(), std::vector<int64_t>{0, 1}, View(table), RopeLayout::kHalfSplit); },
       ErrorCase::kShape, {"one entry per token (1)", "2"}},
      {"ApplyRowOutsideTable",
       [x1] { ApplyRope(x1(), std::vector<int64_t>{2}, View(table), RopeLayout::kHalfSplit); }, ErrorCase::kRange,
       {"row (position) 2", "[0, 2)"}},
      {"ApplyInOutShapeMismatch",
       [] {
         std::vector<float> other(128);
         ApplyRope(HeadsView::Contiguous(buf.data(), 1, 1, 64), HeadsView::Contiguous(other.data(), 2, 1, 64),
                   std::vector<int64_t>{0}, View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"same shape and dtype"}},
      {"ApplyQKMismatch",
       [] {
         std::vector<float> k(2 * 64);
         ApplyRopeQK(HeadsView::Contiguous(buf.data(), 1, 1, 64), HeadsView::Contiguous(k.data(), 2, 1, 64),
                     std::vector<int64_t>{0}, View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"same n_tokens and head_dim"}},
      {"ApplyTokenStrideOverflows",  // 2 * token_stride * 4 bytes passes 64 bits: would wrap before the buffer
       [] {
         ApplyRope(HeadsView{buf.data(), DType::kF32, 3, 1, 64, std::numeric_limits<int64_t>::max() - 1, 64},
                   std::vector<int64_t>{0, 0, 0}, View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"token_stride = 9223372036854775806", "64-bit offset"}},
      {"ApplyHeadStrideOverflowsBytes",  // fits in elements, not in bytes
       [] {
         ApplyRope(HeadsView{buf.data(), DType::kBF16, 1, 2, 64, 64, int64_t{1} << 62}, std::vector<int64_t>{0},
                   View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"head_stride = 4611686018427387904", "64-bit offset"}},
      {"ApplyQKShareMemory",  // q and k the same rows: each would be rotated twice
       [] {
         ApplyRopeQK(HeadsView::Contiguous(buf.data(), 1, 1, 64), HeadsView::Contiguous(buf.data(), 1, 1, 64),
                     std::vector<int64_t>{0}, View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"q and k share memory"}},
      {"ApplyInOutPartlyOverlap",
       [] {
         static std::vector<float> two(3 * 64);
         ApplyRope(HeadsView::Contiguous(two.data(), 2, 1, 64), HeadsView::Contiguous(two.data() + 32, 2, 1, 64),
                   std::vector<int64_t>{0, 1}, View(table), RopeLayout::kHalfSplit);
       },
       ErrorCase::kShape, {"in and out share memory"}},
      {"MaskWrongSize", [] { PositionIdsFromAttentionMask({1, 1, 1}, 2, 2); }, ErrorCase::kShape,
       {"attention_mask", "3"}},
      {"MaskNotBinary", [] { PositionIdsFromAttentionMask({1, 2}, 1, 2); }, ErrorCase::kConfig,
       {"attention_mask[1]", "2"}},
      {"DocLengthZero", [] { PositionIdsForPackedDocuments({3, 0}); }, ErrorCase::kConfig, {"doc_lens[1]", "0"}},
      {"PositionOffsetNegative", [] { PositionRange(-1, 3); }, ErrorCase::kRange, {"offset", "-1"}},
      {"SoftmaxScaleBadScalar", [] { SoftmaxScale(64, -1.0); }, ErrorCase::kConfig,
       {"query_pre_attn_scalar", "-1"}},
      {"SoftmaxScaleBadHeadDim", [] { SoftmaxScale(0); }, ErrorCase::kConfig, {"head_dim", "0"}},
      // config.json parsing
      {"ConfigNotObject", [] { ParseHfRopeConfig(json::array()); }, ErrorCase::kConfig, {"config", "[]"}},
      {"ConfigRopeParametersNotObject",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_parameters", "yarn"}}); }, ErrorCase::kConfig,
       {"rope_parameters", "yarn"}},
      {"ConfigScalingConflictsWithParameters",
       [] {
         ParseHfRopeConfig(json{{"head_dim", 64},
                                {"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}},
                                {"rope_parameters", {{"rope_type", "linear"}, {"factor", 4.0}}}});
       },
       ErrorCase::kConfig, {"rope_scaling.factor", "2.0", "4.0"}},
      {"ConfigTypeConflictsWithRopeType",
       [] {
         ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_scaling", {{"type", "linear"}, {"rope_type", "dynamic"},
                                                                    {"factor", 2.0}}}});
       },
       ErrorCase::kConfig, {"'linear'", "'dynamic'"}},
      {"ConfigThetaConflict",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_theta", 1e4}, {"rope_parameters", {{"rope_theta", 5e5}}}}); },
       ErrorCase::kConfig, {"rope_theta", "500000", "10000"}},
      {"ConfigHeadDimNotDerivable", [] { ParseHfRopeConfig(json{{"hidden_size", 4096}}); }, ErrorCase::kConfig,
       {"head_dim", "num_attention_heads"}},
      {"ConfigZeroHeads",
       [] { ParseHfRopeConfig(json{{"hidden_size", 4096}, {"num_attention_heads", 0}}); }, ErrorCase::kConfig,
       {"num_attention_heads", "0"}},
      {"ConfigPartialFactorOutOfRange",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"partial_rotary_factor", 1.5}}); }, ErrorCase::kConfig,
       {"partial_rotary_factor", "1.5"}},
      {"ConfigFactorNotNumber",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_scaling", {{"type", "linear"}, {"factor", "8"}}}}); },
       ErrorCase::kConfig, {"rope_parameters.factor", "\"8\""}},
      {"ConfigTruncateNotBool",
       [] {
         ParseHfRopeConfig(json{{"head_dim", 64}, {"max_position_embeddings", 4096},
                                {"rope_scaling", {{"type", "yarn"}, {"factor", 4.0}, {"truncate", "no"}}}});
       },
       ErrorCase::kConfig, {"truncate", "\"no\""}},
      {"ConfigMaxPositionNotInteger",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"max_position_embeddings", 4096.5}}); }, ErrorCase::kConfig,
       {"max_position_embeddings", "4096.5"}},
      {"ConfigRopeInterleaveNotBool",
       [] { ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_interleave", 1}}); }, ErrorCase::kConfig,
       {"rope_interleave", "1"}},
      {"ConfigFileMissing", [] { LoadHfRopeConfig("/nonexistent/config.json"); }, ErrorCase::kIo,
       {"/nonexistent/config.json"}},
      // Values accepted as double but not finite (or zero) in the float32 they are used in, and derived
      // quantities that overflow: each names the input that made it so.
      {"RopeThetaInfiniteInFloat32", [] { Freqs(With([](RopeParams& p) { p.rope_theta = 1e39; })); },
       ErrorCase::kConfig, {"rope_theta", "1e+39", "float32"}},
      {"LongropeFactorZeroInFloat32",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLongrope;
           p.factor = 4;
           p.original_max_position_embeddings = 4096;
           p.short_factor.assign(32, 1.0);
           p.long_factor.assign(32, 1.0);
           p.long_factor[5] = 1e-300;
         }));
       },
       ErrorCase::kConfig, {"long_factor[5]", "1e-300", "float32: 0"}},
      {"LongropeFactorMakesTheAngleOverflow",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kLongrope;
           p.factor = 4;
           p.original_max_position_embeddings = 4096;
           p.short_factor.assign(32, 1.0);
           p.short_factor[0] = 1e-30;  // inv_freq[0] = 1e30 rad/token
           p.long_factor.assign(32, 1.0);
         }));
       },
       ErrorCase::kConfig, {"inv_freq[0]", "overflows float32", "short_factor[0] = 1e-30"}},
      {"YarnMscaleAllDimHuge",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kYarn;
           p.factor = 4;
           p.original_max_position_embeddings = 4096;
           p.mscale_all_dim = 1e300;
         }));
       },
       ErrorCase::kConfig, {"softmax-scale multiplier", "mscale_all_dim = 1e+300"}},
      {"YarnImplicitFactorBelowOne",
       [] {
         Freqs(With([](RopeParams& p) {
           p.rope_type = RopeType::kYarn;
           p.max_position_embeddings = 2048;
           p.original_max_position_embeddings = 4096;
         }));
       },
       ErrorCase::kConfig, {"factor is not given", "2048 / 4096", "below 1"}},
      {"HeadDimBeyondAnyModel", [] { Freqs(With([](RopeParams& p) { p.head_dim = 9'000'000'000'000'000; })); },
       ErrorCase::kConfig, {"head_dim must be <= 65536", "9000000000000000", "would need", "PiB"}},
  };
}

class RopeErrors : public ::testing::TestWithParam<ErrorCase> {};

TEST_P(RopeErrors, ThrowsTheRightTypeNamingFieldAndValue) {
  const ErrorCase& c = GetParam();
  try {
    c.call();
    FAIL() << "no exception";
  } catch (const Error& e) {
    const std::string what = e.what();
    switch (c.kind) {
      case ErrorCase::kConfig: EXPECT_NE(dynamic_cast<const ConfigError*>(&e), nullptr) << what; break;
      case ErrorCase::kShape: EXPECT_NE(dynamic_cast<const ShapeError*>(&e), nullptr) << what; break;
      case ErrorCase::kRange: EXPECT_NE(dynamic_cast<const RangeError*>(&e), nullptr) << what; break;
      case ErrorCase::kIo: EXPECT_NE(dynamic_cast<const IoError*>(&e), nullptr) << what; break;
    }
    for (const std::string& m : c.mentions) EXPECT_NE(what.find(m), std::string::npos) << "'" << m << "' in: " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(EachMessage, RopeErrors, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

// Views of one buffer that interleave without sharing an element (q and k of a fused qkv projection) are
// rotated as separate buffers would be; RowsShareMemory is exact, not a bounding-box test.
TEST(RopeErrorsTest, InterleavedViewsOfOneBufferAreNotSharing) {
  const CosSinTable table = ComputeCosSin(ComputeRopeFrequencies(Valid()), std::vector<int64_t>{0, 5, 9});
  std::vector<float> qk(3 * 2 * 64);  // [token, {q, k}, head_dim]
  for (size_t i = 0; i < qk.size(); ++i) qk[i] = std::sin(0.37f * static_cast<float>(i));
  std::vector<float> q_sep(3 * 64), k_sep(3 * 64);
  for (int t = 0; t < 3; ++t) {
    std::copy_n(qk.begin() + t * 128, 64, q_sep.begin() + t * 64);
    std::copy_n(qk.begin() + t * 128 + 64, 64, k_sep.begin() + t * 64);
  }
  const std::vector<int64_t> rows{0, 1, 2};
  ApplyRopeQK(HeadsView{qk.data(), DType::kF32, 3, 1, 64, 128, 64}, HeadsView{qk.data() + 64, DType::kF32, 3, 1, 64, 128, 64},
              rows, View(table), RopeLayout::kHalfSplit);
  ApplyRopeQK(HeadsView::Contiguous(q_sep.data(), 3, 1, 64), HeadsView::Contiguous(k_sep.data(), 3, 1, 64), rows,
              View(table), RopeLayout::kHalfSplit);
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < 64; ++c) {
      ASSERT_EQ(qk[static_cast<size_t>(t * 128 + c)], q_sep[static_cast<size_t>(t * 64 + c)]);
      ASSERT_EQ(qk[static_cast<size_t>(t * 128 + 64 + c)], k_sep[static_cast<size_t>(t * 64 + c)]);
    }
  }
  // The same views shifted by half a row do share: refused.
  EXPECT_THROW(ApplyRopeQK(HeadsView{qk.data(), DType::kF32, 2, 1, 64, 128, 64},
                           HeadsView{qk.data() + 32, DType::kF32, 2, 1, 64, 128, 64}, std::vector<int64_t>{0, 1},
                           View(table), RopeLayout::kHalfSplit),
               ShapeError);
}

}  // namespace
}  // namespace posenc
