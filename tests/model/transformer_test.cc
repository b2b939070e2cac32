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
#include "posenc/eval/methods.h"
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
  model.Forward(tokens, rope.forward(), state, out.v.data());
  return out;
}

// Decodes token by token. Step p's table: the method's table (static methods, dynamic-hf: row p is step p's
// frequencies), or for `per_step_dynamic` the dynamic-NTK table for p + 1 tokens over positions [0, p].
Logits Decode(const std::vector<int>& tokens, const MethodRope& rope, KvCacheMode mode, bool per_step_dynamic) {
  SetBlasThreads(1);  // as Generate does: threaded sgemv on [512, 64] only spin-waits (see DecodeStep)
  const Transformer& model = testing::Stories260K();
  const ModelConfig& c = model.config();
  KvCache cache(mode, c.n_layers, kLen, c.n_kv_heads, c.head_dim());
  ForwardState state;
  Logits out{std::vector<float>(tokens.size() * 512)};
  std::vector<int64_t> positions(tokens.size());
  std::iota(positions.begin(), positions.end(), int64_t{0});
  for (int64_t p = 0; p < static_cast<int64_t>(tokens.size()); ++p) {
    CosSinTable step;
    CosSinView table = View(rope.table);
    if (per_step_dynamic) {
      step = ComputeCosSin(ComputeRopeFrequencies(rope.params, p + 1),
                           std::span<const int64_t>(positions.data(), static_cast<size_t>(p + 1)));
      table = View(step);
    }
    model.DecodeStep(tokens[static_cast<size_t>(p)], table, rope.softmax_scale_multiplier, cache, state,
                     out.v.data() + p * 512);
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
  for (EvalMethod m : {EvalMethod::kNone, EvalMethod::kYarn, EvalMethod::kLinear}) {
    const MethodRope rope = BuildMethodRope(m, kLen, testing::Stories260K().config());
    const Logits full = Prefill(tokens, rope);
    for (KvCacheMode mode : {KvCacheMode::kRotated, KvCacheMode::kUnrotated}) {
      SCOPED_TRACE(std::string(EvalMethodName(m)) + " / " + KvCacheModeName(mode));
      EXPECT_LT(MaxAbsDiff(full, Decode(tokens, rope, mode, false)), kLogitTol);
    }
  }
}

TEST(TransformerTest, DynamicHfPrefillEqualsRotatedCacheDecode) {
  const std::vector<int> tokens = Tokens();
  const MethodRope rope = BuildMethodRope(EvalMethod::kDynamicHf, kLen, testing::Stories260K().config());
  EXPECT_LT(MaxAbsDiff(Prefill(tokens, rope), Decode(tokens, rope, KvCacheMode::kRotated, false)), kLogitTol);
}

TEST(TransformerTest, DynamicPrefillEqualsUnrotatedCacheDecode) {
  const std::vector<int> tokens = Tokens();
  const MethodRope rope = BuildMethodRope(EvalMethod::kDynamic, kLen, testing::Stories260K().config());
  EXPECT_LT(MaxAbsDiff(Prefill(tokens, rope), Decode(tokens, rope, KvCacheMode::kUnrotated, true)), kLogitTol);
}

TEST(TransformerTest, DynamicSemanticsDiffer) {
  // The two dynamic semantics agree up to position L0 - 1 and differ after it: the tests above can tell them
  // apart.
  const std::vector<int> tokens = Tokens();
  const ModelConfig& c = testing::Stories260K().config();
  const Logits pre = Prefill(tokens, BuildMethodRope(EvalMethod::kDynamic, kLen, c));
  const Logits hf = Prefill(tokens, BuildMethodRope(EvalMethod::kDynamicHf, kLen, c));
  double first = 0.0;
  for (int64_t t = 0; t < 512; ++t) {
    for (int64_t i = 0; i < 512; ++i) first = std::max(first, std::fabs(double(pre.at(t, i)) - hf.at(t, i)));
  }
  EXPECT_LT(first, kLogitTol);
  EXPECT_GT(MaxAbsDiff(pre, hf, 512), 1e-2);
}

TEST(TransformerTest, RejectsBadTokensAndShortTables) {
  const Transformer& model = testing::Stories260K();
  const MethodRope rope = BuildMethodRope(EvalMethod::kNone, 4, model.config());
  ForwardState state;
  std::vector<float> logits(8 * 512);
  const std::vector<int> bad = {1, 600, 3};
  EXPECT_THROW(model.Forward(bad, rope.forward(), state, logits.data()), RangeError);
  const std::vector<int> longer = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(model.Forward(longer, rope.forward(), state, logits.data()), RangeError);  // table has 4 rows
}

// Runs Forward on 4 tokens of a stories260K copy whose weights `edit` changed; returns the NumericError text
// ("" if none was thrown).
template <typename Edit>
std::string ForwardError(Edit edit, bool decode) {
  Checkpoint ck = LoadCheckpoint(testing::ModelPath());
  edit(ck.weights);
  const Transformer model(std::move(ck));
  const MethodRope rope = BuildMethodRope(EvalMethod::kNone, 4, model.config());
  ForwardState state;
  std::vector<float> logits(4 * 512);
  const std::vector<int> tokens = {1, 403, 407, 261};
  try {
    if (decode) {
      KvCache cache(KvCacheMode::kRotated, 5, 4, 4, 8);
      for (int t : tokens) model.DecodeStep(t, View(rope.table), 1.0f, cache, state, logits.data());
    } else {
      model.Forward(tokens, rope.forward(), state, logits.data());
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

// NaN in the query weights used to vanish in the softmax (NaN scores became uniform attention weights) and give
// a finite perplexity; NaN in the FFN weights reached the logits unnoticed. Both stop the forward pass with the
// layer, the position and what was not finite (a Checkpoint built in memory skips the reader's check).
TEST(TransformerTest, NonFiniteActivationsStopWithLayerPositionAndWhat) {
  for (bool decode : {false, true}) {
    SCOPED_TRACE(decode ? "DecodeStep" : "Forward");
    // wq row 3 (query channel 3) turns NaN; RoPE mixes pair (2, 3), so channel 2 is the first non-finite one.
    ExpectParts(ForwardError([](ModelWeights& w) { w.wq[3 * 64 + 5] = std::nanf(""); }, decode),
                {"layer 0 of 5", "position 0", "query after RoPE", "head 0, channel 2", "nan"});
    // w1 of layer 2, row 7: hidden unit 7 turns NaN at every position, then the residual stream.
    ExpectParts(ForwardError([](ModelWeights& w) { w.w1[2 * 172 * 64 + 7 * 64] = std::nanf(""); }, decode),
                {"layer 2 of 5", "position 0", "residual stream after the feed-forward block", "nan"});
    // Finite weights that overflow float32: rms_att_weight of layer 1 at 3e38 makes the normed input infinite
    // wherever |x / rms(x)| > 1.14, and the queries then inf or NaN.
    ExpectParts(ForwardError([](ModelWeights& w) {
                  for (int64_t i = 0; i < 64; ++i) w.rms_att_weight[64 + i] = 3e38f;
                },
                             decode),
                {"layer 1 of 5", "position 0", "query after RoPE"});
  }
}

}  // namespace
}  // namespace posenc
