// Every config, run and apply example in tests/data/hf_rope_reference.json (values produced by running
// Hugging Face transformers' own RoPE code): inv_freq within 1 ulp of HF float32, attention factor equal,
// hf-mode cos/sin within 2 ulp of HF float32, exact-mode cos/sin within the derived bound of HF float64.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <vector>

#include "posenc/rope/hf_config.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/hf_dynamic_state.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::UlpDistance;
using testing::UlpOf;

const json& Reference() {
  static const json ref = testing::LoadTestJson("hf_rope_reference.json");
  return ref;
}

// The reference's input_config as the config.json a user would have: attrs at top level plus the rope keys.
json AsConfigJson(const json& input) {
  json c = input.at("attrs");
  // DeepSeek-V3's config.json names its model_type, whose HF config class defaults rope_interleave to true.
  if (c.value("hidden_size", 0) == 7168) c["model_type"] = "deepseek_v3";
  c["rope_theta"] = input.at("rope_theta");
  if (!input.at("rope_scaling").is_null()) c["rope_scaling"] = input.at("rope_scaling");
  if (!input.at("partial_rotary_factor").is_null()) c["partial_rotary_factor"] = input.at("partial_rotary_factor");
  return c;
}

std::optional<int64_t> SeqLen(const json& run) {
  if (run.at("seq_len").is_null()) return std::nullopt;
  return run.at("seq_len").get<int64_t>();
}

std::vector<std::string> ConfigNames() {
  std::vector<std::string> names;
  for (const auto& [name, value] : Reference().at("configs").items()) names.push_back(name);
  return names;
}

class HfReferenceConfig : public ::testing::TestWithParam<std::string> {
 protected:
  const json& cfg() const { return Reference().at("configs").at(GetParam()); }
  RopeParams Params() const { return ParseHfRopeConfig(AsConfigJson(cfg().at("input_config"))).params; }
  // The float64 run with the same label as a float32 run.
  const json& Float64Run(const json& run32) const {
    for (const json& r : cfg().at("runs")) {
      if (r.at("precision") == "float64" && r.at("label") == run32.at("label")) return r;
    }
    throw std::runtime_error("no float64 twin");
  }
};

TEST_P(HfReferenceConfig, RotaryDimMatches) {
  EXPECT_EQ(Params().RotaryDim(), cfg().at("rotary_dim").get<int64_t>());
}

TEST_P(HfReferenceConfig, InvFreqWithinOneUlpAndAttentionFactorEqual) {
  const RopeParams params = Params();
  for (const json& run : cfg().at("runs")) {
    if (run.at("precision") != "float32") continue;
    SCOPED_TRACE(run.at("label").get<std::string>());
    const RopeFrequencies f = ComputeRopeFrequencies(params, SeqLen(run));
    const auto expected = run.at("inv_freq").get<std::vector<double>>();
    ASSERT_EQ(f.inv_freq.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_LE(UlpDistance(f.inv_freq[i], static_cast<float>(expected[i])), 1)
          << "pair " << i << ": " << f.inv_freq[i] << " vs HF " << expected[i];
    }
    EXPECT_DOUBLE_EQ(f.attention_factor, run.at("attention_scaling").get<double>());
  }
}

// hf mode with HF's own float32 inv_freq: cos/sin within 2 ulp of HF's float32 tables (the angle is the
// same float32 product; only the cos/sin kernels differ, each within 1 ulp of correctly rounded).
// With posenc's inv_freq (correctly rounded pow; torch's vectorised float32 pow is a 1-ulp approximation,
// so about 1 pair in 50 differs by 1 ulp) the angle differs by pos * |inv - inv_hf| on top of that, which
// plus the two float32 roundings of the angle (ulp(angle) / 2 each), the only extra allowance in the
// second check.
TEST_P(HfReferenceConfig, HfPrecisionCosSinWithinTwoUlpOfHfFloat32) {
  const RopeParams params = Params();
  for (const json& run : cfg().at("runs")) {
    if (run.at("precision") != "float32") continue;
    SCOPED_TRACE(run.at("label").get<std::string>());
    const RopeFrequencies ours = ComputeRopeFrequencies(params, SeqLen(run));
    RopeFrequencies hf_freqs = ours;
    const auto inv_hf = run.at("inv_freq").get<std::vector<double>>();
    for (size_t i = 0; i < inv_hf.size(); ++i) hf_freqs.inv_freq[i] = static_cast<float>(inv_hf[i]);
    const auto positions = run.at("positions").get<std::vector<int64_t>>();
    const CosSinTable t_hf = ComputeCosSin(hf_freqs, positions, RopePrecision::kHf);
    const CosSinTable t_ours = ComputeCosSin(ours, positions, RopePrecision::kHf);
    const int64_t half = t_hf.half;
    for (size_t r = 0; r < positions.size(); ++r) {
      const auto cos_ref = run.at("cos").at(r).get<std::vector<double>>();
      const auto sin_ref = run.at("sin").at(r).get<std::vector<double>>();
      ASSERT_EQ(static_cast<int64_t>(cos_ref.size()), 2 * half);  // HF: cat(freqs, freqs)
      for (int64_t j = 0; j < 2 * half; ++j) {
        const size_t i = static_cast<size_t>(j % half);
        const size_t k = static_cast<size_t>(static_cast<int64_t>(r) * half) + i;
        const float c_ref = static_cast<float>(cos_ref[static_cast<size_t>(j)]);
        const float s_ref = static_cast<float>(sin_ref[static_cast<size_t>(j)]);
        EXPECT_LE(UlpDistance(t_hf.cos[k], c_ref), 2) << "cos at position " << positions[r] << " channel " << j;
        EXPECT_LE(UlpDistance(t_hf.sin[k], s_ref), 2) << "sin at position " << positions[r] << " channel " << j;
        const double angle_shift = static_cast<double>(positions[r]) *
                                   std::fabs(static_cast<double>(ours.inv_freq[i]) - inv_hf[i]) *
                                   ours.attention_factor +
                                   UlpOf(ours.inv_freq[i] * static_cast<float>(positions[r])) * ours.attention_factor;
        EXPECT_LE(std::fabs(t_ours.cos[k] - c_ref), angle_shift + 2 * UlpOf(c_ref))
            << "cos at position " << positions[r] << " channel " << j;
        EXPECT_LE(std::fabs(t_ours.sin[k] - s_ref), angle_shift + 2 * UlpOf(s_ref))
            << "sin at position " << positions[r] << " channel " << j;
      }
    }
  }
}

// Exact mode computes cos(inv32 * pos) (inv32 = HF's float32 inv_freq) to within 1 float32 ulp; HF's float64
// run computes cos(inv64 * pos). The two differ by at most |pos| * |inv32 - inv64| * attention_factor
// (|d cos/d angle| <= 1), plus our final rounding (1 ulp of the value) and the float64 run's own angle
// rounding (|angle| * 2^-52). That sum is the bound; nothing else is allowed.
TEST_P(HfReferenceConfig, ExactPrecisionCosSinWithinDerivedBoundOfHfFloat64) {
  const RopeParams params = Params();
  for (const json& run32 : cfg().at("runs")) {
    if (run32.at("precision") != "float32") continue;
    const json& run64 = Float64Run(run32);
    SCOPED_TRACE(run64.at("label").get<std::string>());
    const RopeFrequencies f = ComputeRopeFrequencies(params, SeqLen(run64));
    const auto inv64 = run64.at("inv_freq").get<std::vector<double>>();
    const double att = run64.at("attention_scaling").get<double>();
    const auto positions = run64.at("positions").get<std::vector<int64_t>>();
    const CosSinTable t = ComputeCosSin(f, positions, RopePrecision::kExact);
    const int64_t half = t.half;
    double worst_ratio = 0.0;
    for (size_t r = 0; r < positions.size(); ++r) {
      const double pos = static_cast<double>(positions[r]);
      const auto cos_ref = run64.at("cos").at(r).get<std::vector<double>>();
      const auto sin_ref = run64.at("sin").at(r).get<std::vector<double>>();
      for (int64_t i = 0; i < half; ++i) {
        const size_t k = static_cast<size_t>(static_cast<int64_t>(r) * half + i);
        const double d_inv = std::fabs(static_cast<double>(f.inv_freq[static_cast<size_t>(i)]) -
                                       inv64[static_cast<size_t>(i)]);
        const double angle = pos * inv64[static_cast<size_t>(i)];
        for (const auto& [ours, ref] : {std::pair{t.cos[k], cos_ref[static_cast<size_t>(i)]},
                                        std::pair{t.sin[k], sin_ref[static_cast<size_t>(i)]}}) {
          const double bound = pos * d_inv * att + UlpOf(ours) + std::fabs(angle) * 0x1p-52 * att;
          const double err = std::fabs(static_cast<double>(ours) - ref);
          EXPECT_LE(err, bound) << "position " << pos << " pair " << i;
          if (bound > 0) worst_ratio = std::max(worst_ratio, err / bound);
        }
      }
    }
    RecordProperty("worst_error_over_bound", std::to_string(worst_ratio));
  }
}

INSTANTIATE_TEST_SUITE_P(AllConfigs, HfReferenceConfig, ::testing::ValuesIn(ConfigNames()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           }
                           return n;
                         });

// The HF dynamic module's stateful trace: at every step the table HF used is the pure function of the
// sequence length it had grown to (max_seq_len_cached_after); posenc computes it from that length, with no
// state carried between calls.
TEST(HfReference, DynamicStatefulTraceTablesArePureFunctionsOfLength) {
  const json& trace = Reference().at("dynamic_stateful_trace");
  const RopeParams params = ParseHfRopeConfig(AsConfigJson(
      Reference().at("configs").at(trace.at("config").get<std::string>()).at("input_config"))).params;
  int checked = 0;
  for (const json& step : trace.at("steps")) {
    if (step.at("precision") != "float32") continue;
    const int64_t grown = step.at("max_seq_len_cached_after").get<int64_t>();
    const RopeFrequencies f = ComputeRopeFrequencies(params, grown);
    const auto expected = step.at("inv_freq_after").get<std::vector<double>>();
    ASSERT_EQ(f.inv_freq.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_LE(UlpDistance(f.inv_freq[i], static_cast<float>(expected[i])), 1)
          << "seq_len " << step.at("seq_len") << " pair " << i;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// The same trace through the opt-in HF emulation: one state object, successive calls; its cached length
// and table after each call equal HF's (growth, no reset at seq_len == L, reset below L).
TEST(HfReference, DynamicStatefulTraceReproducedByHfDynamicRopeState) {
  const json& trace = Reference().at("dynamic_stateful_trace");
  const RopeParams params = ParseHfRopeConfig(AsConfigJson(
      Reference().at("configs").at(trace.at("config").get<std::string>()).at("input_config"))).params;
  HfDynamicRopeState state(params);
  int checked = 0;
  for (const json& step : trace.at("steps")) {
    if (step.at("precision") != "float32") continue;
    const RopeFrequencies& f = state.Update(step.at("seq_len").get<int64_t>());
    EXPECT_EQ(state.max_seq_len_cached(), step.at("max_seq_len_cached_after").get<int64_t>());
    const auto expected = step.at("inv_freq_after").get<std::vector<double>>();
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_LE(UlpDistance(f.inv_freq[i], static_cast<float>(expected[i])), 1) << "seq_len " << step.at("seq_len");
    }
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// apply_rotary_examples: q, k of shape [batch 1, heads 2, seq 5, head_dim] (HF's [b, h, s, d] layout), so
// the HeadsView has token_stride = head_dim and head_stride = seq * head_dim.
class HfApplyExample : public ::testing::TestWithParam<int> {};

std::vector<float> Flatten(const json& x) {  // [1][2][5][D] -> flat
  std::vector<float> out;
  for (const json& b : x) {
    for (const json& h : b) {
      for (const json& s : h) {
        for (const json& v : s) out.push_back(v.get<float>());
      }
    }
  }
  return out;
}

TEST_P(HfApplyExample, MatchesHfOutputs) {
  const json& ex = Reference().at("apply_rotary_examples").at(static_cast<size_t>(GetParam()));
  const std::string config_name = ex.at("config").get<std::string>();
  SCOPED_TRACE(config_name);
  const HfRopeConfig hf = ParseHfRopeConfig(AsConfigJson(Reference().at("configs").at(config_name).at(
      "input_config")));
  const RopeFrequencies f = ComputeRopeFrequencies(hf.params);
  std::vector<double> inv64;  // HF's float64 inv_freq, for the exact-mode bound
  for (const json& r : Reference().at("configs").at(config_name).at("runs")) {
    if (r.at("precision") == "float64") inv64 = r.at("inv_freq").get<std::vector<double>>();
  }
  const auto shape = ex.at("shape").get<std::vector<int64_t>>();
  const int64_t n_heads = shape[1], seq = shape[2], head_dim = shape[3];
  const int64_t rotary_dim = hf.params.RotaryDim(), half = rotary_dim / 2;
  const bool interleaved = config_name == "deepseek-v3";
  ASSERT_EQ(hf.layout, interleaved ? RopeLayout::kInterleaved : RopeLayout::kHalfSplit);
  for (const json& c : ex.at("cases")) {
    const bool f64 = c.at("precision") == "float64";
    SCOPED_TRACE(c.at("precision").get<std::string>() + " positions " + c.at("position_ids").dump());
    const auto positions = c.at("position_ids").get<std::vector<int64_t>>();
    const CosSinTable t = ComputeCosSin(f, positions, f64 ? RopePrecision::kExact : RopePrecision::kHf);
    for (const char* which : {"q", "k"}) {
      const std::vector<float> input = Flatten(ex.at(which));
      std::vector<float> x = input;
      const HeadsView view{x.data(), DType::kF32, seq, n_heads, head_dim, head_dim, seq * head_dim};
      std::vector<int64_t> rows(static_cast<size_t>(seq));
      for (int64_t s = 0; s < seq; ++s) rows[static_cast<size_t>(s)] = s;
      ApplyRope(view, rows, View(t), hf.layout);
      const std::vector<double> expected = [&] {
        std::vector<double> e;
        for (const json& b : c.at(std::string(which) + "_embed")) {
          for (const json& h : b) {
            for (const json& s : h) {
              for (const json& v : s) e.push_back(v.get<double>());
            }
          }
        }
        return e;
      }();
      ASSERT_EQ(expected.size(), x.size());
      for (int64_t h = 0; h < n_heads; ++h) {
        for (int64_t s = 0; s < seq; ++s) {
          const int64_t base = h * seq * head_dim + s * head_dim;
          for (int64_t j = 0; j < head_dim; ++j) {
            // DeepSeek's HF path returns de-interleaved channels: HF channel i <-> ours 2i, i + half <-> 2i + 1.
            int64_t ours = j;
            if (interleaved && j < rotary_dim) ours = j < half ? 2 * j : 2 * (j - half) + 1;
            const double got = x[static_cast<size_t>(base + ours)];
            const double want = expected[static_cast<size_t>(base + j)];
            if (j >= rotary_dim) {
              // pass-through channels: bit-identical to the input
              EXPECT_EQ(x[static_cast<size_t>(base + j)], input[static_cast<size_t>(base + j)]);
              continue;
            }
            // float32: same cos/sin (within 2 ulp) and HF's operation order a*c - b*s: error <= 2 ulp(1) *
            // (|a| + |b|) * attention + 1 ulp of the result. float64: the exact-mode cos/sin bound above,
            // pos * |inv32 - inv64|, times |a| + |b|, plus float32 rounding of the products.
            const int64_t i = ours < rotary_dim ? (interleaved ? ours / 2 : ours % half) : 0;
            const int64_t partner = interleaved ? (ours ^ 1) : (ours < half ? ours + half : ours - half);
            const double a = std::fabs(input[static_cast<size_t>(base + ours)]);
            const double b = std::fabs(input[static_cast<size_t>(base + partner)]);
            const double pos = static_cast<double>(positions[static_cast<size_t>(s)]);
            const double d_inv = std::fabs(f.inv_freq[static_cast<size_t>(i)] - inv64[static_cast<size_t>(i)]);
            const double angle_err = f64 ? pos * d_inv : 0.0;
            const double bound = (a + b) * (angle_err * f.attention_factor + 4 * 0x1p-24 * f.attention_factor) +
                                 testing::UlpOf(static_cast<float>(want));
            EXPECT_NEAR(got, want, bound) << which << " head " << h << " pos " << pos << " channel " << j;
          }
        }
      }
    }
    if (c.contains("softmax_scale_multiplier_mscale_all_dim_squared")) {
      EXPECT_DOUBLE_EQ(f.softmax_scale_multiplier,
                       c.at("softmax_scale_multiplier_mscale_all_dim_squared").get<double>());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllExamples, HfApplyExample, ::testing::Range(0, 3));

}  // namespace
}  // namespace posenc
