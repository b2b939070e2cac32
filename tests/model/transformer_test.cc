// Transformer: a full-window forward pass equals token-by-token decoding through the KV cache, in both cache
// modes, for static RoPE methods and for both dynamic-NTK semantics.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/model/methods.h"
#include "posenc/rope/frequencies.h"

namespace posenc {
namespace {

constexpr int64_t kLen = 700;  // crosses L0 = 512, so scaled and dynamic rows differ from plain RoPE

struct Logits {
  std::vector<float> v;  // [kLen, vocab]
  float at(int64_t t, int64_t i) const { return v[static_cast<size_t>(t * 512 + i)]; }
};

Logits Prefill(const std::vector<int>& tokens, const MethodRope& rope) {
  const Transformer& model = testing::Stories260K();
  ForwardState state;
  Logits out{std::vector<float>(tokens.size() * 512)};
  std::vector<int64_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), int64_t{0});
  model.Forward(tokens, positions, rope.forward(), state, out.v.data());
  return out;
}

// Decodes token by token. Step p's table: the method's table (static methods, dynamic-hf: row p is step p's
// frequencies), or for `per_step_dynamic` the dynamic-NTK table for p + 1 tokens over positions [0, p].
Logits Decode(const std::vector<int>& tokens, const MethodRope& rope, KvCacheMode mode, bool per_step_dynamic) {
  SetBlasThreads(1);  // as Generate does: threaded sgemv on [512, 64] only spin-waits (see DecodeStep)
  const Transformer& model = testing::Stories260K();
  const ModelConfig& c = model.config();
  KvCache cache(mode, c.n_layers, kLen, c.n_kv_heads, c.head_dim);
  ForwardState state;
  Logits out{std::vector<float>(tokens.size() * 512)};
  const ForwardRope static_rope = rope.forward();
  for (int64_t p = 0; p < static_cast<int64_t>(tokens.size()); ++p) {
    MethodRope step;
    if (per_step_dynamic) step = BuildDynamicStepRope(p + 1, c);  // dynamic NTK for p + 1 tokens
    model.DecodeStep(tokens[static_cast<size_t>(p)], p, per_step_dynamic ? step.forward() : static_rope, cache,
                     state, out.v.data() + p * 512);
  }
  return out;
}

double MaxAbsDiff(const Logits& a, const Logits& b, int64_t from = 0) {
  double m = 0.0;
  for (int64_t t = from; t < kLen; ++t) {
    for (int64_t i = 0; i < 512; ++i) m = std::max(m, std::fabs(double(a.at(t, i)) - double(b.at(t, i))));
  }
  return m;
}

std::vector<int> Tokens() {
  std::vector<int> s = testing::StreamOf("tinystories_sample_cs336.txt");
  s.resize(kLen);
  return s;
}

// Tolerance on logits (|logit| <= ~25 here). Prefill and decode compute the same float32 math in a different
// order: sgemm vs sgemv accumulation, the attention's 8-lane partial sums over 1..700 keys, and (dynamic) keys
// rotated before the dot product vs the fused rotate-and-dot kernel. Each float32 sum of n terms carries a
// relative error ~ n * 2^-24 of its absolute terms; over 5 layers and a 512-way classifier this stays below
// ~1e-4 absolute (observed: 2.4e-5 to 5.5e-5). A semantic error (wrong position, wrong table, wrong cache mode)
// moves logits by 1e-2 and more (see DynamicSemanticsDiffer).
constexpr double kLogitTol = 2e-4;

TEST(TransformerTest, PrefillEqualsDecodeStaticRopeBothCacheModes) {
  const std::vector<int> tokens = Tokens();
  for (RopeMethod m : {RopeMethod::kNone, RopeMethod::kYarn, RopeMethod::kLinear}) {
    const MethodRope rope = BuildMethodRope(m, kLen, testing::Stories260K().config());
    const Logits full = Prefill(tokens, rope);
    for (KvCacheMode mode : {KvCacheMode::kRotated, KvCacheMode::kUnrotated}) {
      SCOPED_TRACE(std::string(RopeMethodName(m)) + " / " + KvCacheModeName(mode));
      EXPECT_LT(MaxAbsDiff(full, Decode(tokens, rope, mode, false)), kLogitTol);
    }
  }
}

TEST(TransformerTest, DynamicHfPrefillEqualsRotatedCacheDecode) {
  const std::vector<int> tokens = Tokens();
  const MethodRope rope = BuildMethodRope(RopeMethod::kDynamicHf, kLen, testing::Stories260K().config());
  EXPECT_LT(MaxAbsDiff(Prefill(tokens, rope), Decode(tokens, rope, KvCacheMode::kRotated, false)), kLogitTol);
}

TEST(TransformerTest, DynamicPrefillEqualsUnrotatedCacheDecode) {
  const std::vector<int> tokens = Tokens();
  const MethodRope rope = BuildMethodRope(RopeMethod::kDynamic, kLen, testing::Stories260K().config());
  EXPECT_LT(MaxAbsDiff(Prefill(tokens, rope), Decode(tokens, rope, KvCacheMode::kUnrotated, true)), kLogitTol);
}

TEST(TransformerTest, DynamicSemanticsDiffer) {
  // The two dynamic semantics agree up to position L0 - 1 and differ after it: the tests above can tell them
  // apart.
  const std::vector<int> tokens = Tokens();
  const ModelConfig& c = testing::Stories260K().config();
  const Logits pre = Prefill(tokens, BuildMethodRope(RopeMethod::kDynamic, kLen, c));
  const Logits hf = Prefill(tokens, BuildMethodRope(RopeMethod::kDynamicHf, kLen, c));
  double first = 0.0;
  for (int64_t t = 0; t < 512; ++t) {
    for (int64_t i = 0; i < 512; ++i) first = std::max(first, std::fabs(double(pre.at(t, i)) - hf.at(t, i)));
  }
  EXPECT_LT(first, kLogitTol);
  EXPECT_GT(MaxAbsDiff(pre, hf, 512), 1e-2);
}

TEST(TransformerTest, RejectsBadTokensAndShortTables) {
  const Transformer& model = testing::Stories260K();
  const MethodRope rope = BuildMethodRope(RopeMethod::kNone, 4, model.config());
  ForwardState state;
  std::vector<float> logits(8 * 512);
  const std::vector<int> bad = {1, 600, 3};
  const std::vector<int64_t> three = {0, 1, 2};
  EXPECT_THROW(model.Forward(bad, three, rope.forward(), state, logits.data()), RangeError);
  const std::vector<int> longer = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> six = {0, 1, 2, 3, 4, 5};
  EXPECT_THROW(model.Forward(longer, six, rope.forward(), state, logits.data()), RangeError);  // table has 4 rows
  const std::vector<int> four = {1, 2, 3, 4};
  const std::vector<int64_t> past = {0, 1, 2, 4};  // position 4 has no row
  EXPECT_THROW(model.Forward(four, past, rope.forward(), state, logits.data()), RangeError);
  EXPECT_THROW(model.Forward(four, three, rope.forward(), state, logits.data()), RangeError);  // 3 ids, 4 tokens
}

// Runs Forward on 4 tokens of a stories260K copy whose weights `edit` changed (the edited tensors are copies
// the views point to); returns the NumericError text ("" if none was thrown).
template <typename Edit>
std::string ForwardError(Edit edit, bool decode) {
  ModelFile file = LoadModelFile(testing::ModelPath());
  std::vector<std::vector<float>> copies;
  // A float32 copy of a tensor that `edit` may change; the view points to it from now on.
  auto copy = [&](TensorView& t) -> float* {
    const float* src = static_cast<const float*>(t.data);
    copies.emplace_back(src, src + t.n_elements());
    t.data = copies.back().data();
    return copies.back().data();
  };
  copies.reserve(8);
  edit(file.tensors, copy);
  const Transformer model(file);
  const MethodRope rope = BuildMethodRope(RopeMethod::kNone, 4, model.config());
  ForwardState state;
  std::vector<float> logits(4 * 512);
  const std::vector<int> tokens = {1, 403, 407, 261};
  try {
    if (decode) {
      KvCache cache(KvCacheMode::kRotated, 5, 4, 4, 8);
      for (size_t i = 0; i < tokens.size(); ++i) {
        model.DecodeStep(tokens[i], static_cast<int64_t>(i), rope.forward(), cache, state, logits.data());
      }
    } else {
      const std::vector<int64_t> positions = {0, 1, 2, 3};
      model.Forward(tokens, positions, rope.forward(), state, logits.data());
    }
  } catch (const NumericError& e) {
    return e.what();
  }
  return "";
}

void ExpectParts(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty()) << "no NumericError";
  for (const std::string& p : parts) EXPECT_NE(message.find(p), std::string::npos) << message;
}

// Non-finite queries used to vanish in the softmax (NaN scores became uniform attention weights) and give a
// finite perplexity; non-finite FFN outputs reached the logits unnoticed. Both stop the forward pass with the
// layer, the position and what was not finite. Weights are checked finite at load, so the cases here are finite
// weights whose products overflow float32.
TEST(TransformerTest, NonFiniteActivationsStopWithLayerPositionAndWhat) {
  for (bool decode : {false, true}) {
    SCOPED_TRACE(decode ? "DecodeStep" : "Forward");
    // wq row 3 of layer 0 (query channel 3) at +-3e38: the sum overflows; RoPE mixes pair (2, 3), so channel 2
    // is the first non-finite one.
    ExpectParts(ForwardError(
                    [](ModelTensors& t, auto copy) {
                      float* w = copy(t.layers[0].wq);
                      for (int64_t i = 0; i < 64; ++i) w[3 * 64 + i] = i % 2 == 0 ? 3e38f : -3e38f;
                    },
                    decode),
                {"layer 0 of 5", "position 0", "query after RoPE", "head 0, channel 2"});
    // w1 of layer 2, row 7 at 3e38: hidden unit 7 overflows at every position, then the residual stream.
    ExpectParts(ForwardError(
                    [](ModelTensors& t, auto copy) {
                      float* w = copy(*t.layers[2].w_gate);
                      for (int64_t i = 0; i < 64; ++i) w[7 * 64 + i] = 3e38f;
                    },
                    decode),
                {"layer 2 of 5", "position 0", "residual stream after the feed-forward block"});
    // rms_att_weight of layer 1 at 3e38 makes the normed input infinite wherever |x / rms(x)| > 1.14, and the
    // queries then inf or NaN.
    ExpectParts(ForwardError(
                    [](ModelTensors& t, auto copy) {
                      float* w = copy(t.layers[1].attn_norm->weight);
                      for (int64_t i = 0; i < 64; ++i) w[i] = 3e38f;
                    },
                    decode),
                {"layer 1 of 5", "position 0", "query after RoPE"});
  }
}

// A NaN weight is refused when the model is built, naming the file, the tensor, the element and the value.
TEST(TransformerTest, NonFiniteWeightsAreRefusedAtLoad) {
  ModelFile file = LoadModelFile(testing::ModelPath());
  TensorView& wk = file.tensors.layers[1].wk;
  std::vector<float> w(static_cast<const float*>(wk.data), static_cast<const float*>(wk.data) + wk.n_elements());
  w[2 * 64 + 5] = std::nanf("");
  wk.data = w.data();
  try {
    const Transformer model(file);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    ExpectParts(e.what(), {testing::ModelPath(), "tensor wk[1]", "element [2, 5]", "nan"});
  }
}

}  // namespace
}  // namespace posenc
