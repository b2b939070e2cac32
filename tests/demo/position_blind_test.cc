// posenc demo position-blind on the bundled model: permutation equivariance of unmasked attention without
// positions (within a float32 bound on summation order), and its failure with positions or a causal mask.
#include "posenc/demo/position_blind.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "posenc/demo/common.h"
#include "posenc/model/transformer.h"

namespace posenc::demo {
namespace {

const std::string kModel = std::string(POSENC_DATA_DIR) + "/stories260K.bin";
const std::string kTokenizer = std::string(POSENC_DATA_DIR) + "/tok512.bin";

const PositionBlindDemo& Demo() {
  static const PositionBlindDemo demo = RunPositionBlindDemo(kModel, kTokenizer);
  return demo;
}

const PositionBlindVariant& Variant(PositionEncoding encoding, bool causal) {
  for (const PositionBlindVariant& v : Demo().variants) {
    if (v.encoding == encoding && v.causal == causal) return v;
  }
  ADD_FAILURE() << "no variant " << PositionEncodingName(encoding) << " causal=" << causal;
  return Demo().variants.front();
}

TEST(PositionBlindDemo, SentenceBIsAPermutationOfSentenceA) {
  const PositionBlindDemo& d = Demo();
  ASSERT_EQ(d.tokens_a.size(), d.tokens_b.size());
  ASSERT_EQ(d.permutation.size(), d.tokens_b.size());
  std::vector<int64_t> sorted = d.permutation;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], static_cast<int64_t>(i));  // a bijection
  for (size_t j = 0; j < d.tokens_b.size(); ++j) {
    EXPECT_EQ(d.tokens_b[j], d.tokens_a[static_cast<size_t>(d.permutation[j])]) << j;
  }
  // words map to words: "the" (first) stays first, "cat" (last in B) is A's second word
  EXPECT_EQ(d.permutation.front(), 0);
  EXPECT_EQ(d.pieces_b[static_cast<size_t>(d.shown_token_b)], d.pieces_a[1]);
  EXPECT_EQ(d.dim, 64);
  EXPECT_EQ(d.head_dim, 8);
}

TEST(PositionBlindDemo, WithoutPositionsUnmaskedAttentionIsPermutationEquivariant) {
  const PositionBlindVariant& v = Variant(PositionEncoding::kNone, false);
  EXPECT_TRUE(v.permuted);
  for (double diff : v.token_diff) EXPECT_LE(diff, v.bound);
  const PositionBlindDemo& d = Demo();
  for (size_t c = 0; c < 4; ++c) EXPECT_NEAR(d.shown_none_a[c], d.shown_none_b[c], v.bound);
}

TEST(PositionBlindDemo, PositionsBreakTheSymmetry) {
  for (PositionEncoding e : {PositionEncoding::kSinusoidal, PositionEncoding::kLearned, PositionEncoding::kRope}) {
    const PositionBlindVariant& v = Variant(e, false);
    EXPECT_FALSE(v.permuted) << PositionEncodingName(e);
    EXPECT_GT(v.max_diff, v.bound) << PositionEncodingName(e);
  }
}

TEST(PositionBlindDemo, CausalMaskAloneBreaksItExceptForTheFirstToken) {
  for (PositionEncoding e : {PositionEncoding::kNone, PositionEncoding::kRope}) {
    const PositionBlindVariant& v = Variant(e, true);
    // token 0 attends only to itself in both sentences (softmax weight exactly 1, RoPE at position 0 is the
    // identity): bit-identical
    EXPECT_EQ(v.token_diff.front(), 0.0) << PositionEncodingName(e);
    // every other token sees a different prefix
    for (size_t j = 1; j < v.token_diff.size(); ++j) EXPECT_GT(v.token_diff[j], v.bound) << j;
  }
}

TEST(PositionBlindDemo, EquivarianceOnRandomSequences) {
  // the property itself, on other inputs: random ids, a random permutation, no positions, unmasked
  const Transformer model = Transformer::Load(kModel);
  DemoRng rng(11);
  for (int trial = 0; trial < 3; ++trial) {
    const size_t n = 7;
    std::vector<int> a(n);
    for (int& id : a) id = static_cast<int>(rng.Int(3, model.config().vocab_size - 1));
    std::vector<int64_t> perm(n);
    for (size_t i = 0; i < n; ++i) perm[i] = static_cast<int64_t>(i);
    for (size_t i = n - 1; i > 0; --i)
      std::swap(perm[i], perm[static_cast<size_t>(rng.Int(0, static_cast<int64_t>(i)))]);
    std::vector<int> b(n);
    for (size_t j = 0; j < n; ++j) b[j] = a[static_cast<size_t>(perm[j])];
    const std::vector<float> out_a = LayerZeroAttention(model, a, PositionEncoding::kNone, false);
    const std::vector<float> out_b = LayerZeroAttention(model, b, PositionEncoding::kNone, false);
    const size_t dim = static_cast<size_t>(model.config().dim);
    const double bound = LayerZeroPermutationBound(model, a, PositionEncoding::kNone, false);
    for (size_t j = 0; j < n; ++j) {
      for (size_t c = 0; c < dim; ++c) {
        EXPECT_NEAR(out_b[j * dim + c], out_a[static_cast<size_t>(perm[j]) * dim + c], bound)
            << "trial " << trial << " token " << j;
      }
    }
  }
}

// The same layer from other files of the same model: the GGUF F32 file holds llama2.c's weights in the same
// (interleaved) row order, so every output is bit-identical; the Hugging Face folder holds them in half-split
// order, so the verdicts are the same and the outputs agree within the bound.
TEST(PositionBlindDemo, AnyFormatOfTheModelGivesTheSameLayer) {
  const PositionBlindDemo gguf =
      RunPositionBlindDemo(std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-F32.gguf", "");
  // (the folder holds no tokenizer: the llama2.c vocabulary it was converted with)
  const PositionBlindDemo hf =
      RunPositionBlindDemo(std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-hf", kTokenizer);
  const PositionBlindDemo& bin = Demo();
  EXPECT_EQ(gguf.model_name, "stories260K-F32.gguf");
  EXPECT_EQ(hf.architecture, "llama");
  EXPECT_NE(hf.rope.find("half-split"), std::string::npos) << hf.rope;
  EXPECT_NE(bin.rope.find("interleaved"), std::string::npos) << bin.rope;
  EXPECT_NE(bin.rope.find("layer 0's own"), std::string::npos) << bin.rope;
  for (const PositionBlindDemo* d : {&gguf, &hf}) {
    EXPECT_EQ(d->tokens_a, bin.tokens_a);
    EXPECT_EQ(d->permutation, bin.permutation);
    ASSERT_EQ(d->variants.size(), bin.variants.size());
    for (size_t i = 0; i < bin.variants.size(); ++i) {
      EXPECT_EQ(d->variants[i].permuted, bin.variants[i].permuted) << i;
      if (d == &gguf) {
        EXPECT_EQ(d->variants[i].token_diff, bin.variants[i].token_diff) << i;
      } else if (!bin.variants[i].permuted) {
        EXPECT_GT(d->variants[i].max_diff, d->variants[i].bound) << i;
      }
    }
  }
  for (size_t c = 0; c < 4; ++c) {
    EXPECT_EQ(gguf.shown_rope_b[c], bin.shown_rope_b[c]);
    EXPECT_NEAR(hf.shown_rope_b[c], bin.shown_rope_b[c], 1e-5);
  }
}

TEST(PositionBlindDemo, RenderShowsTheVerdicts) {
  const std::string text = RenderPositionBlindDemo(Demo());
  EXPECT_NE(text.find("permuted"), std::string::npos);
  EXPECT_NE(text.find("different"), std::string::npos);
  EXPECT_NE(text.find("B is A permuted"), std::string::npos);
}

}  // namespace
}  // namespace posenc::demo
