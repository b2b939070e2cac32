// Every RoPE case of tests/data/bug_cases.json (failures from public bug reports), one test per case, found by
// its "kind". Expected values are read from the JSON; the learned-PE KV-cache offset and the sinusoidal layout
// cases live in tests/pe/.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "posenc/attention/softmax_scale.h"
#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/position_ids.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;

// The case of bug_cases.json whose "kind" is `kind` (e.g. "layout_flag_ignored").
const json& Case(const std::string& kind) {
  static const json cases = testing::LoadTestJson("bug_cases.json");
  for (const json& c : cases.at("cases")) {
    if (c.at("kind") == kind) return c;
  }
  throw std::runtime_error("no bug case of kind " + kind);
}

RopeParams Plain(int64_t head_dim, double theta, int64_t rotary_dim = 0) {
  RopeParams p;
  p.head_dim = head_dim;
  p.rope_theta = theta;
  p.rotary_dim = rotary_dim;
  return p;
}

// Rotates one head vector x at one position with params and layout (exact precision).
std::vector<float> Rotate(std::vector<float> x, const RopeParams& p, int64_t pos, RopeLayout layout) {
  const CosSinTable t = ComputeCosSin(ComputeRopeFrequencies(p), std::vector<int64_t>{pos});
  const int64_t row = 0;
  ApplyRope(HeadsView::Contiguous(x.data(), 1, 1, p.head_dim), std::span<const int64_t>(&row, 1), View(t),
            layout);
  return x;
}

// Printed references carry 6-7 significant digits: half a unit in the last printed place.
constexpr double kPrinted = 5e-7;

TEST(PublicBugReports, LayoutFlagHonouredOnEveryPath) {
  const json& c = Case("layout_flag_ignored");
  const RopeParams p = Plain(4, c.at("inputs").at("base").get<double>());
  const int64_t pos = c.at("inputs").at("pos").get<int64_t>();
  const auto x = c.at("inputs").at("x").get<std::vector<float>>();
  const auto half = c.at("expected").at("half_split_neox").get<std::vector<double>>();
  const auto inter = c.at("expected").at("interleaved_gptj").get<std::vector<double>>();
  const std::vector<float> h = Rotate(x, p, pos, RopeLayout::kHalfSplit);
  const std::vector<float> i = Rotate(x, p, pos, RopeLayout::kInterleaved);
  for (size_t k = 0; k < 4; ++k) {
    EXPECT_NEAR(h[k], half[k], 2 * kPrinted);
    EXPECT_NEAR(i[k], inter[k], 2 * kPrinted);
  }
  // interleaved(x) == unperm(half(perm(x))), perm = [0, 2, 1, 3]: bit-identical (same pairs, same math).
  const int perm[4] = {0, 2, 1, 3};
  std::vector<float> xp(4);
  for (int k = 0; k < 4; ++k) xp[static_cast<size_t>(k)] = x[static_cast<size_t>(perm[k])];
  const std::vector<float> hp = Rotate(xp, p, pos, RopeLayout::kHalfSplit);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(i[static_cast<size_t>(perm[k])], hp[static_cast<size_t>(k)]);
  // Every entry point honours the layout: the cache path, the out-of-place path and the fused Q+K path.
  RopeCache cache(ComputeRopeFrequencies(p));
  std::vector<float> via_cache = x, out(4), q = x, k = x;
  const int64_t position = pos;
  ApplyRope(HeadsView::Contiguous(via_cache.data(), 1, 1, 4), std::span<const int64_t>(&position, 1), cache,
            RopeLayout::kInterleaved);
  std::vector<float> in = x;
  ApplyRope(HeadsView::Contiguous(in.data(), 1, 1, 4), HeadsView::Contiguous(out.data(), 1, 1, 4),
            std::span<const int64_t>(&position, 1), cache.view(), RopeLayout::kInterleaved);
  ApplyRopeQK(HeadsView::Contiguous(q.data(), 1, 1, 4), HeadsView::Contiguous(k.data(), 1, 1, 4),
              std::span<const int64_t>(&position, 1), cache.view(), RopeLayout::kInterleaved);
  EXPECT_EQ(via_cache, i);
  EXPECT_EQ(out, i);
  EXPECT_EQ(q, i);
  EXPECT_EQ(k, i);
}

TEST(PublicBugReports, DoubleRotationIsVisible) {
  const json& c = Case("double_rotation");
  const auto& e = c.at("expected");
  RopeFrequencies f;
  f.inv_freq = c.at("inputs").at("inv_freq").get<std::vector<float>>();
  const int64_t pos = c.at("inputs").at("pos").get<int64_t>();
  const CosSinTable t = ComputeCosSin(f, std::vector<int64_t>{pos});
  const int64_t row = 0;
  std::vector<float> x = c.at("inputs").at("x").get<std::vector<float>>();
  const HeadsView v = HeadsView::Contiguous(x.data(), 1, 1, 2);
  ApplyRope(v, std::span<const int64_t>(&row, 1), View(t), RopeLayout::kInterleaved);
  const auto once = e.at("rotated_no_scaling").get<std::vector<double>>();
  EXPECT_NEAR(x[0], once[0], kPrinted);
  EXPECT_NEAR(x[1], once[1], kPrinted);
  ApplyRope(v, std::span<const int64_t>(&row, 1), View(t), RopeLayout::kInterleaved);  // the bug: twice
  const auto twice = e.at("wrong_if_rotated_twice").get<std::vector<double>>();
  EXPECT_NEAR(x[0], twice[0], kPrinted);
  EXPECT_NEAR(x[1], twice[1], kPrinted);
  // With the YaRN factor-32 attention factor folded into cos/sin, one rotation scales the norm by it.
  RopeParams yarn = Plain(2, 10000.0);
  yarn.rope_type = RopeType::kYarn;
  yarn.factor = 32.0;
  yarn.original_max_position_embeddings = 4096;
  f.attention_factor = ComputeRopeFrequencies(yarn).attention_factor;
  EXPECT_DOUBLE_EQ(f.attention_factor, c.at("inputs").at("yarn_attention_factor").get<double>());
  const CosSinTable scaled = ComputeCosSin(f, std::vector<int64_t>{pos});
  std::vector<float> y = c.at("inputs").at("x").get<std::vector<float>>();
  const HeadsView vy = HeadsView::Contiguous(y.data(), 1, 1, 2);
  ApplyRope(vy, std::span<const int64_t>(&row, 1), View(scaled), RopeLayout::kInterleaved);
  EXPECT_NEAR(std::hypot(y[0], y[1]), e.at("norm_with_attention_factor").get<double>(), 2e-7);
  ApplyRope(vy, std::span<const int64_t>(&row, 1), View(scaled), RopeLayout::kInterleaved);
  EXPECT_NEAR(std::hypot(y[0], y[1]), e.at("wrong_norm_if_factor_applied_twice").get<double>(), 4e-7);
}

TEST(PublicBugReports, PartialRotaryUsesRotaryDimForFrequenciesAndPairs) {
  const json& c = Case("partial_rotary_frequency_and_pairing");
  const auto& in = c.at("inputs");
  const RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("base").get<double>(),
                             in.at("rotary_dim").get<int64_t>());
  const RopeFrequencies f = ComputeRopeFrequencies(p);
  ASSERT_EQ(f.inv_freq.size(), 32u);
  EXPECT_LE(testing::UlpDistance(f.inv_freq[1], static_cast<float>(c.at("expected").at("inv_freq_1").get<double>())),
            1);
  std::vector<float> e0(128, 0.0f);
  e0[0] = 1.0f;
  const std::vector<float> out = Rotate(e0, p, in.at("pos").get<int64_t>(), RopeLayout::kHalfSplit);
  EXPECT_NEAR(out[0], c.at("expected").at("out_index_0").get<double>(), kPrinted);
  EXPECT_NEAR(out[32], c.at("expected").at("out_index_32").get<double>(), kPrinted);
  EXPECT_EQ(out[64], c.at("expected").at("out_index_64").get<double>());
  const std::vector<float> ones = Rotate(std::vector<float>(128, 1.0f), p, 1, RopeLayout::kHalfSplit);
  for (size_t j = 64; j < 128; ++j) EXPECT_EQ(ones[j], 1.0f) << "pass-through channel " << j;
}

TEST(PublicBugReports, PartialRotaryFactorFromConfig) {
  const json& c = Case("partial_rotary_factor_from_config");
  const HfRopeConfig hf = ParseHfRopeConfig(c.at("inputs").at("config"));
  EXPECT_EQ(hf.params.RotaryDim(), c.at("expected").at("rotary_dim").get<int64_t>());
  const RopeFrequencies f = ComputeRopeFrequencies(hf.params);
  EXPECT_EQ(static_cast<int64_t>(f.inv_freq.size()), c.at("expected").at("num_frequencies").get<int64_t>());
  RopeCache cache(f);
  cache.Reserve(3);
  EXPECT_EQ(cache.view().half * 2, c.at("expected").at("cos_sin_cache_width").get<int64_t>());
  // GLM's implicit 0.5 when the config is silent.
  const HfRopeConfig glm = ParseHfRopeConfig(json{{"model_type", "glm4"}, {"head_dim", 128}});
  EXPECT_EQ(glm.params.RotaryDim(), 64);
}

RopeParams YarnParams(double factor) {
  RopeParams p = Plain(128, 10000.0);
  p.rope_type = RopeType::kYarn;
  p.factor = factor;
  p.original_max_position_embeddings = 4096;
  return p;
}

TEST(PublicBugReports, ExplicitYarnAttentionFactorKept) {
  const json& c = Case("yarn_explicit_attention_factor_ignored");
  RopeParams p = YarnParams(c.at("inputs").at("factor").get<double>());
  EXPECT_DOUBLE_EQ(ComputeRopeFrequencies(p).attention_factor,
                   c.at("expected").at("wrong_default_if_key_dropped").get<double>());
  // The key survives the config parser, under both spellings of the dict.
  for (const char* dict : {"rope_scaling", "rope_parameters"}) {
    const json config = {{"head_dim", 128},
                         {dict, {{"rope_type", "yarn"}, {"factor", 64.0}, {"attention_factor", 1.0},
                                 {"original_max_position_embeddings", 4096}}}};
    EXPECT_EQ(ComputeRopeFrequencies(ParseHfRopeConfig(config).params).attention_factor,
              c.at("expected").at("attention_factor_used").get<double>());
  }
}

TEST(PublicBugReports, YarnAttentionFactorNotAppliedTwice) {
  const json& c = Case("yarn_attention_factor_double_applied");
  const auto& cases = c.at("inputs").at("cases");
  for (size_t k = 0; k < cases.size(); ++k) {
    RopeParams p = YarnParams(cases[k].at("factor").get<double>());
    p.attention_factor = cases[k].at("attention_factor").get<double>();
    const double got = ComputeRopeFrequencies(p).attention_factor;
    EXPECT_EQ(got, c.at("expected").at("cases")[k].at("final_scale").get<double>());
  }
}

TEST(PublicBugReports, MlaSoftmaxScaleUsesMscaleAllDim) {
  const json& c = Case("mla_softmax_scale_mscale_all_dim");
  const int64_t qk_head_dim = c.at("inputs").at("qk_head_dim").get<int64_t>();
  const auto& cases = c.at("inputs").at("cases");
  const auto& expected = c.at("expected").at("cases");
  for (size_t k = 0; k < cases.size(); ++k) {
    RopeParams p = YarnParams(c.at("inputs").at("factor").get<double>());
    p.head_dim = 64;
    p.mscale = cases[k].at("mscale").get<double>();
    p.mscale_all_dim = cases[k].at("mscale_all_dim").get<double>();
    const RopeFrequencies f = ComputeRopeFrequencies(p);
    const auto& e = expected[k];
    if (e.contains("softmax_scale")) {
      EXPECT_NEAR(SoftmaxScale(qk_head_dim, std::nullopt, f.softmax_scale_multiplier),
                  e.at("softmax_scale").get<double>(), 1e-15);
    }
    if (e.contains("softmax_multiplier")) {
      EXPECT_NEAR(f.softmax_scale_multiplier, e.at("softmax_multiplier").get<double>(), 1e-15);
    }
    if (e.contains("rope_attention_factor")) {
      EXPECT_DOUBLE_EQ(f.attention_factor, e.at("rope_attention_factor").get<double>());
    }
  }
}

TEST(PublicBugReports, YarnCorrectionRangeUsesOriginalLength) {
  const json& c = Case("yarn_original_max_position_embeddings");
  const auto& in = c.at("inputs");
  RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("rope_theta").get<double>());
  p.rope_type = RopeType::kYarn;
  p.factor = in.at("factor").get<double>();
  p.beta_fast = in.at("beta_fast").get<double>();
  p.beta_slow = in.at("beta_slow").get<double>();
  p.truncate = in.at("truncate").get<bool>();
  p.max_position_embeddings = in.at("max_position_embeddings").get<int64_t>();
  p.original_max_position_embeddings = in.at("original_max_position_embeddings").get<int64_t>();
  const YarnRange r = YarnCorrectionRange(p);
  EXPECT_NEAR(r.low, c.at("expected").at("low").get<double>(), 1e-12);
  EXPECT_NEAR(r.high, c.at("expected").at("high").get<double>(), 1e-12);
  p.original_max_position_embeddings = p.max_position_embeddings;  // the bug: post-extension length
  const YarnRange wrong = YarnCorrectionRange(p);
  EXPECT_NEAR(wrong.low, c.at("expected").at("wrong_if_131072_used").at("low").get<double>(), 1e-12);
  EXPECT_NE(wrong.low, r.low);
}

RopeParams DynamicParams(const json& in) {
  RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("base").get<double>());
  p.rope_type = RopeType::kDynamic;
  p.factor = in.at("factor").get<double>();
  p.max_position_embeddings = in.at("max_position_embeddings").get<int64_t>();
  return p;
}

TEST(PublicBugReports, DynamicNtkLeavesNoStateBehind) {
  const json& c = Case("dynamic_ntk_cache_not_reset");
  const RopeParams p = DynamicParams(c.at("inputs"));
  const auto lengths = c.at("inputs").at("call_sequence_lengths").get<std::vector<int64_t>>();
  const auto bases = c.at("expected").at("base_per_call").get<std::vector<double>>();
  std::vector<std::vector<float>> outputs;
  for (size_t k = 0; k < lengths.size(); ++k) {
    EXPECT_NEAR(DynamicNtkBase(p, lengths[k]), bases[k], bases[k] * 1e-12);
    const RopeFrequencies f = ComputeRopeFrequencies(p, lengths[k]);
    std::vector<float> x(128, 0.5f);
    const int64_t pos = lengths[k] - 1;
    const CosSinTable t = ComputeCosSin(f, std::vector<int64_t>{pos});
    const int64_t row = 0;
    ApplyRope(HeadsView::Contiguous(x.data(), 1, 1, 128), std::span<const int64_t>(&row, 1), View(t),
              RopeLayout::kHalfSplit);
    outputs.push_back(x);
  }
  EXPECT_EQ(outputs[2], outputs[0]);  // bit-identical: the 8192 call changed nothing
}

TEST(PublicBugReports, DynamicNtkBaseDependsOnLength) {
  const json& c = Case("dynamic_ntk_static_or_wrong_formula");
  const RopeParams p = DynamicParams(c.at("inputs"));
  const auto lengths = c.at("inputs").at("seq_lens").get<std::vector<int64_t>>();
  const auto bases = c.at("expected").at("base").get<std::vector<double>>();
  for (size_t k = 0; k < lengths.size(); ++k) {
    EXPECT_NEAR(DynamicNtkBase(p, lengths[k]), bases[k], bases[k] * 1e-12) << "seq_len " << lengths[k];
    // and the table really uses it
    const std::vector<float> expected = DefaultInvFreq(bases[k], 128);
    EXPECT_EQ(ComputeRopeFrequencies(p, lengths[k]).inv_freq, expected);
  }
}

TEST(PublicBugReports, Llama3ScaledFrequenciesReturned) {
  const json& c = Case("llama3_scaling_discarded");
  const auto& cases = c.at("inputs").at("cases");
  for (size_t k = 0; k < cases.size(); ++k) {
    const json& in = cases[k];
    RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("rope_theta").get<double>());
    p.rope_type = ParseRopeType("llama3");
    p.factor = in.at("factor").get<double>();
    p.low_freq_factor = in.at("low_freq_factor").get<double>();
    p.high_freq_factor = in.at("high_freq_factor").get<double>();
    p.original_max_position_embeddings = in.at("original_max_position_embeddings").get<int64_t>();
    const RopeFrequencies f = ComputeRopeFrequencies(p);
    for (const auto& [index, value] : c.at("expected").at("cases")[k].at("inv_freq").items()) {
      // The expected values are float64 evaluations printed to 11 digits. posenc follows HF's float32
      // operation order (bit-identical to HF's float32 run for Llama-3.1 in hf_reference_test), and that
      // order rounds 7 times in the medium band: wavelen, L0/wavelen, - low, / (high - low), 1 - smooth,
      // * a / factor, + smooth * a. Each rounding is <= 0.5 ulp of its operand; the blend's cancellation
      // (L0/wavelen - low) amplifies them to at most 4 ulp of the result (3.1 measured on pair 16).
      const double want = value.get<double>();
      EXPECT_NEAR(f.inv_freq[std::stoul(index)], want, 4 * testing::UlpOf(static_cast<float>(want)))
          << "pair " << index;
    }
  }
  // legacy key `type` accepted; an unknown type is an error, not a silent default
  EXPECT_EQ(ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}})
                .params.rope_type,
            RopeType::kLinear);
  EXPECT_THROW(ParseHfRopeConfig(json{{"head_dim", 64}, {"rope_scaling", {{"rope_type", "llama-3"}}}}),
               ConfigError);
}

TEST(PublicBugReports, LongropeFactorSetChosenByPositionsNotCapacity) {
  const json& c = Case("longrope_factor_selection_by_capacity");
  const auto& in = c.at("inputs");
  RopeParams p = Plain(96, 10000.0);
  p.rope_type = RopeType::kLongrope;
  p.max_position_embeddings = in.at("max_position_embeddings").get<int64_t>();
  p.original_max_position_embeddings = in.at("original_max_position_embeddings").get<int64_t>();
  p.short_factor.assign(48, 1.0);
  p.long_factor.assign(48, 4.0);
  const RopeFrequencies prompt = ComputeRopeFrequencies(p, in.at("prompt_len").get<int64_t>());
  EXPECT_EQ(prompt.inv_freq, DefaultInvFreq(10000.0, 96));  // short factors (all 1): the plain table
  EXPECT_EQ(prompt.attention_factor, c.at("expected").at("attention_factor").get<double>());
  const RopeFrequencies long_seq = ComputeRopeFrequencies(p, *p.original_max_position_embeddings + 1);
  EXPECT_NE(long_seq.inv_freq, prompt.inv_freq);
  EXPECT_EQ(long_seq.attention_factor, prompt.attention_factor);  // same factor for both sets
  // boundary: seq_len == L0 (max position L0 - 1) is still short
  EXPECT_EQ(ComputeRopeFrequencies(p, *p.original_max_position_embeddings).inv_freq, prompt.inv_freq);
}

TEST(PublicBugReports, CosSinComputedInFloat32OrBetter) {
  const json& c = Case("cos_sin_low_precision");
  const auto& in = c.at("inputs");
  const RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("base").get<double>());
  const RopeFrequencies f = ComputeRopeFrequencies(p);
  const int64_t pos = in.at("pos").get<int64_t>();
  const size_t pair = in.at("pair_index").get<size_t>();
  const double want = c.at("expected").at("cos").get<double>();
  EXPECT_NEAR(static_cast<double>(f.inv_freq[pair]) * static_cast<double>(pos),
              c.at("expected").at("angle").get<double>(), 1e-4);
  const CosSinTable exact = ComputeCosSin(f, std::vector<int64_t>{pos}, RopePrecision::kExact);
  const float got = exact.cos[pair];
  // float32 output: within one float32 ulp (the reference angle uses float64 inv_freq; the float32 one
  // shifts the angle by < 1857 * 2^-25 * inv = 3e-5 rad... so the reference here is cos of OUR angle).
  const double our_angle = static_cast<double>(f.inv_freq[pair]) * static_cast<double>(pos);
  EXPECT_LE(std::fabs(got - std::cos(our_angle)), testing::UlpOf(got));
  EXPECT_NEAR(got, want, 3.1e-5);  // |d angle| <= pos * ulp(inv)/2 = 1857 * 2^-24 * 0.56 / 2
  // bfloat16 / float16 outputs: the float32 table rounded once, within one output ulp of the reference.
  EXPECT_LE(std::fabs(BF16ToF32(F32ToBF16(got)) - want), 0x1p-9);   // bf16 ulp at 0.31: 2^-9
  EXPECT_LE(std::fabs(F16ToF32(F32ToF16(got)) - want), 0x1p-12);    // fp16 ulp at 0.31: 2^-12
  EXPECT_GT(std::fabs(c.at("expected").at("wrong_fp16_pipeline_cos").get<double>() - want), 0.5);
}

TEST(PublicBugReports, InvFreqNotRoundedToModelDtype) {
  const json& c = Case("inv_freq_rounded_before_phase");
  const auto& in = c.at("inputs");
  const RopeParams p = Plain(in.at("head_dim").get<int64_t>(), in.at("base").get<double>());
  const RopeFrequencies f = ComputeRopeFrequencies(p);
  const int64_t pos = in.at("pos").get<int64_t>();
  const size_t pair = in.at("pair_index").get<size_t>();
  const double angle = static_cast<double>(f.inv_freq[pair]) * static_cast<double>(pos);
  EXPECT_LE(std::fabs(angle - c.at("expected").at("angle").get<double>()), 1e-3);
  // bfloat16 q/k: the table stays float32, only the stored values round. Rotate e0 stored as bf16 and
  // compare to the float32 cos: within one bf16 rounding (2^-9 relative).
  std::vector<uint16_t> x(128, F32ToBF16(0.0f));
  x[pair] = F32ToBF16(1.0f);
  const CosSinTable t = ComputeCosSin(f, std::vector<int64_t>{pos});
  const int64_t row = 0;
  ApplyRope(HeadsView::Contiguous(x.data(), DType::kBF16, 1, 1, 128), std::span<const int64_t>(&row, 1), View(t),
            RopeLayout::kHalfSplit);
  const double want = c.at("expected").at("cos").get<double>();
  EXPECT_LE(std::fabs(BF16ToF32(x[pair]) - want), 0x1p-9);
}

TEST(PublicBugReports, LeftPaddingPositionIds) {
  const json& c = Case("left_padding_position_ids");
  std::vector<int64_t> mask;
  for (const json& row : c.at("inputs").at("attention_mask")) {
    for (const json& v : row) mask.push_back(v.get<int64_t>());
  }
  std::vector<int64_t> expected;
  for (const json& row : c.at("expected").at("position_ids")) {
    for (const json& v : row) expected.push_back(v.get<int64_t>());
  }
  EXPECT_EQ(PositionIdsFromAttentionMask(mask, 2, 5), expected);
  EXPECT_EQ(NextDecodePositions(mask, 2, 5), c.at("expected").at("next_decode_position").get<std::vector<int64_t>>());
  // real tokens of the padded row rotate exactly as the unpadded prompt
  const RopeFrequencies f = ComputeRopeFrequencies(Plain(8, 10000.0));
  RopeCache cache(f);
  std::vector<float> padded(5 * 8), plain(3 * 8);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = 0.1f * static_cast<float>(i % 13) - 0.4f;
  std::copy(plain.begin(), plain.end(), padded.begin() + 16);
  ApplyRope(HeadsView::Contiguous(padded.data(), 5, 1, 8), std::span<const int64_t>(expected.data(), 5), cache,
            RopeLayout::kHalfSplit);
  const std::vector<int64_t> plain_pos = PositionRange(0, 3);
  ApplyRope(HeadsView::Contiguous(plain.data(), 3, 1, 8), plain_pos, cache, RopeLayout::kHalfSplit);
  EXPECT_TRUE(std::equal(plain.begin(), plain.end(), padded.begin() + 16));
}

TEST(PublicBugReports, PackedDocumentsRestartPositions) {
  const json& c = Case("packed_sequence_positions");
  const std::vector<int64_t> pos = PositionIdsForPackedDocuments(c.at("inputs").at("doc_lens").get<std::vector<int64_t>>());
  EXPECT_EQ(pos, c.at("expected").at("position_ids").get<std::vector<int64_t>>());
  // two identical documents of 3 tokens packed together rotate identically
  const std::vector<int64_t> two = PositionIdsForPackedDocuments({3, 3});
  RopeCache cache(ComputeRopeFrequencies(Plain(8, 10000.0)));
  std::vector<float> x(6 * 8);
  for (size_t i = 0; i < 24; ++i) x[i] = x[i + 24] = 0.05f * static_cast<float>(i) - 0.3f;
  ApplyRope(HeadsView::Contiguous(x.data(), 6, 1, 8), two, cache, RopeLayout::kInterleaved);
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + 24, x.begin() + 24));
}

TEST(PublicBugReports, CacheRowsFollowPositionsNotLength) {
  const RopeFrequencies f = ComputeRopeFrequencies(Plain(8, 10000.0));
  RopeCache cache(f);
  for (const json& call : Case("cos_sin_cache_key_offset").at("inputs").at("calls")) {
    const std::vector<int64_t> pos = PositionRange(call.at("offset").get<int64_t>(), call.at("seq_len").get<int64_t>());
    std::vector<float> a(pos.size() * 8, 1.0f), b = a;
    ApplyRope(HeadsView::Contiguous(a.data(), static_cast<int64_t>(pos.size()), 1, 8), pos, cache,
              RopeLayout::kHalfSplit);
    const CosSinTable direct = ComputeCosSin(f, pos);
    ApplyRope(HeadsView::Contiguous(b.data(), static_cast<int64_t>(pos.size()), 1, 8), PositionRange(0, 4),
              View(direct), RopeLayout::kHalfSplit);
    EXPECT_EQ(a, b) << "offset " << call.at("offset");
  }
}

TEST(PublicBugReports, BatchedRowsUseTheirOwnPositions) {
  const json& in = Case("batched_kernel_position_index").at("inputs");
  const int64_t batch = in.at("batch").get<int64_t>(), seq = in.at("seq_len").get<int64_t>();
  const int64_t heads = in.at("n_heads").get<int64_t>(), hd = in.at("head_dim").get<int64_t>();
  const RopeFrequencies f = ComputeRopeFrequencies(Plain(hd, 10000.0));
  const CosSinTable table = ComputeCosSin(f, PositionRange(0, in.at("max_positions").get<int64_t>()));
  std::vector<float> x(static_cast<size_t>(batch * seq * heads * hd));
  for (int64_t i = 0; i < seq * heads * hd; ++i) {
    x[static_cast<size_t>(i)] = x[static_cast<size_t>(i + seq * heads * hd)] = std::sin(0.37f * static_cast<float>(i));
  }
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t s = 0; s < seq; ++s) rows.push_back(s);
  }
  ApplyRope(HeadsView::Contiguous(x.data(), batch * seq, heads, hd), rows, View(table), RopeLayout::kHalfSplit);
  EXPECT_TRUE(std::equal(x.begin(), x.begin() + seq * heads * hd, x.begin() + seq * heads * hd));
  // A row past the table is an error naming it, never a read past the end.
  rows.back() = seq;
  EXPECT_THROW(ApplyRope(HeadsView::Contiguous(x.data(), batch * seq, heads, hd), rows, View(table),
                         RopeLayout::kHalfSplit),
               RangeError);
}

TEST(PublicBugReports, LinearFactorSameOnPrefillAndDecode) {
  const json& c = Case("linear_factor_inverted");
  RopeParams p = Plain(8, 10000.0);
  p.rope_type = ParseRopeType(c.at("inputs").at("rope_type").get<std::string>());
  p.factor = c.at("inputs").at("factor").get<double>();
  const RopeFrequencies f = ComputeRopeFrequencies(p);
  const int64_t pos = c.at("inputs").at("pos").get<int64_t>();
  const double angle = static_cast<double>(f.inv_freq[0]) * static_cast<double>(pos);
  EXPECT_EQ(angle, c.at("expected").at("angle").get<double>());
  // prefill: one call over positions 0..pos; decode: a cache grown one position at a time
  const CosSinTable prefill = ComputeCosSin(f, PositionRange(0, pos + 1));
  RopeCache decode(f);
  for (int64_t q = 0; q <= pos; ++q) decode.Reserve(q + 1);
  const CosSinView d = decode.view();
  EXPECT_EQ(prefill.cos[static_cast<size_t>(pos * prefill.half)], d.cos[pos * d.half]);
  EXPECT_EQ(prefill.cos[static_cast<size_t>(pos * prefill.half)], static_cast<float>(std::cos(2.0)));
}

TEST(PublicBugReports, RopeThetaReadFromNestedParameters) {
  const json& c = Case("rope_theta_config");
  const HfRopeConfig hf = ParseHfRopeConfig(c.at("inputs").at("config"));
  EXPECT_EQ(hf.params.rope_theta, c.at("expected").at("base").get<double>());
  EXPECT_LE(testing::UlpDistance(ComputeRopeFrequencies(hf.params).inv_freq[1],
                                 static_cast<float>(c.at("expected").at("inv_freq_1").get<double>())),
            1);
  json conflicting = c.at("inputs").at("config");
  conflicting["rope_theta"] = 10000.0;
  EXPECT_THROW(ParseHfRopeConfig(conflicting), ConfigError);
  // a missing theta is a visible default, not a silent one
  const HfRopeConfig missing = ParseHfRopeConfig(json{{"head_dim", 128}});
  EXPECT_EQ(missing.params.rope_theta, 10000.0);
  ASSERT_FALSE(missing.warnings.empty());
  EXPECT_NE(missing.warnings[0].find("rope_theta"), std::string::npos);
}

TEST(PublicBugReports, SoftmaxScaleIsExplicit) {
  const json& in = Case("attention_scale").at("inputs");
  EXPECT_EQ(SoftmaxScale(in.at("head_dim").get<int64_t>(), in.at("query_pre_attn_scalar").get<double>()),
            Case("attention_scale").at("expected").at("scale").get<double>());
  EXPECT_EQ(SoftmaxScale(256), 0.0625);  // default head_dim^-0.5
}

}  // namespace
}  // namespace posenc
