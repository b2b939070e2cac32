// Row reuse in RunEval: IdenticalForwardInputs accepts exactly the rows whose forward inputs equal an earlier
// row's bit for bit, and a reused row's result equals the computed one bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/model_test_util.h"
#include "posenc/eval/evaluate.h"
#include "posenc/model/methods.h"

namespace posenc {
namespace {

TEST(ReuseTest, IdenticalForwardInputsFollowsTheTablesNotTheNames) {
  const ModelConfig& c = testing::Stories260K().config();
  ASSERT_EQ(c.train_ctx, 512);
  for (int64_t ctx : {256, 512}) {  // factor 1: every default method's table equals none's
    const MethodRope none = BuildMethodRope(RopeMethod::kNone, ctx, c);
    for (RopeMethod m : DefaultRopeMethods()) {
      SCOPED_TRACE(::testing::Message() << "ctx " << ctx << " " << RopeMethodName(m));
      EXPECT_TRUE(IdenticalForwardInputs(BuildMethodRope(m, ctx, c), none));
    }
  }
  const MethodRope none = BuildMethodRope(RopeMethod::kNone, 1024, c);
  for (RopeMethod m : DefaultRopeMethods()) {  // past L0 every scaled method differs from none
    if (m == RopeMethod::kNone) continue;
    SCOPED_TRACE(RopeMethodName(m));
    EXPECT_FALSE(IdenticalForwardInputs(BuildMethodRope(m, 1024, c), none));
  }
  // One bit of one table entry, or of the attention scale, is enough to refuse.
  MethodRope flipped = BuildMethodRope(RopeMethod::kNone, 256, c);
  const MethodRope plain = BuildMethodRope(RopeMethod::kNone, 256, c);
  flipped.tables[0].sin[77] = std::bit_cast<float>(std::bit_cast<uint32_t>(flipped.tables[0].sin[77]) ^ 1u);
  EXPECT_FALSE(IdenticalForwardInputs(flipped, plain));
  MethodRope scaled = BuildMethodRope(RopeMethod::kNone, 256, c);
  scaled.multipliers[0] = std::nextafter(1.0f, 2.0f);
  EXPECT_FALSE(IdenticalForwardInputs(scaled, plain));
  EXPECT_FALSE(IdenticalForwardInputs(plain, BuildMethodRope(RopeMethod::kNone, 512, c)));  // other ctx
}

TEST(ReuseTest, ReusedRowsEqualComputedRowsBitForBit) {
  EvalOptions o;
  o.model_path = testing::ModelPath();
  o.tokenizer_path = testing::TokenizerPath();
  o.text_path = testing::TextPath("tinystories_val_head.txt");
  o.ctx = {256, 1024};
  o.methods = {RopeMethod::kNone, RopeMethod::kYarn, RopeMethod::kDynamic};
  o.n_pred = 1024;
  const EvalReport reused = RunEval(o);
  o.reuse_identical_rows = false;
  const EvalReport computed = RunEval(o);
  ASSERT_EQ(reused.rows.size(), 6u);
  ASSERT_EQ(computed.rows.size(), 6u);
  const std::vector<int64_t> want_same_as = {-1, 0, 0, -1, -1, -1};  // only ctx 256 yarn and dynamic = none
  for (size_t i = 0; i < reused.rows.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "row " << i);
    EXPECT_EQ(reused.rows[i].same_as, want_same_as[i]);
    EXPECT_EQ(computed.rows[i].same_as, -1);
    EXPECT_EQ(std::bit_cast<uint64_t>(reused.rows[i].result.mean_nll),
              std::bit_cast<uint64_t>(computed.rows[i].result.mean_nll));
    ASSERT_EQ(reused.rows[i].result.buckets.size(), computed.rows[i].result.buckets.size());
    for (size_t b = 0; b < reused.rows[i].result.buckets.size(); ++b) {
      EXPECT_EQ(std::bit_cast<uint64_t>(reused.rows[i].result.buckets[b].mean_nll),
                std::bit_cast<uint64_t>(computed.rows[i].result.buckets[b].mean_nll));
    }
  }
}

}  // namespace
}  // namespace posenc
