// The flat parameter layout: GGUF names in order, shapes, the contiguous q/k/v and gate/up groups the fused
// products rely on, tied and untied classifiers, the learned table, and stories260K's parameter count.
#include "posenc/train/parameters.h"

#include <gtest/gtest.h>

#include "posenc/core/errors.h"
#include "posenc/train/config.h"
#include "tiny_model.h"

namespace posenc {
namespace {

TEST(ParameterLayoutTest, Stories260KHasTheCheckpointsParameterCount) {
  const ParameterLayout layout(testing::ModelOf(Stories260KConfig()));
  // 512 x 64 embedding + 5 x (2 x 64 + 64 x 64 + 2 x 32 x 64 + 64 x 64 + 3 x 172 x 64) + 64 final norm
  EXPECT_EQ(layout.total(), 512 * 64 + 5 * (2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 172 * 64) + 64);
  EXPECT_EQ(layout.total(), 260032);
  EXPECT_EQ(layout.tensors().front().name, "token_embd.weight");
  EXPECT_EQ(layout.tensors().back().name, "output_norm.weight");
  EXPECT_THROW(layout.Find("output.weight"), ConfigError);  // tied
}

TEST(ParameterLayoutTest, FusedGroupsAreContiguousAndViewsPointAtThem) {
  TrainShape c = Stories260KConfig();
  c.attention_bias = true;
  c.tied_embeddings = false;
  c.position_encoding = PositionEncoding::kLearned;
  const ParameterLayout layout(testing::ModelOf(c));
  int64_t expect = 0;
  for (const ParameterTensor& t : layout.tensors()) {  // no gaps, no overlaps
    EXPECT_EQ(t.offset, expect) << t.name;
    expect += t.size();
  }
  EXPECT_EQ(expect, layout.total());
  const ParameterTensor& q = layout.Find("blk.2.attn_q.weight");
  EXPECT_EQ(layout.Find("blk.2.attn_k.weight").offset, q.offset + 64 * 64);
  EXPECT_EQ(layout.Find("blk.2.attn_v.weight").offset, q.offset + 64 * 64 + 32 * 64);
  EXPECT_EQ(layout.Find("blk.2.attn_k.bias").offset, layout.Find("blk.2.attn_q.bias").offset + 64);
  EXPECT_EQ(layout.Find("blk.2.ffn_up.weight").offset, layout.Find("blk.2.ffn_gate.weight").offset + 172 * 64);
  EXPECT_EQ(layout.Find("position_embd.weight").shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(layout.Find("blk.2.attn_output.weight").shape, (std::vector<int64_t>{64, 64}));
  EXPECT_FALSE(layout.Find("blk.2.ffn_norm.weight").decay);
  EXPECT_FALSE(layout.Find("blk.2.attn_v.bias").decay);
  EXPECT_TRUE(layout.Find("output.weight").decay);
  EXPECT_EQ(layout.Find("blk.4.ffn_down.weight").layer, 4);
  EXPECT_EQ(layout.At(q.offset + 3).name, "blk.2.attn_q.weight");
  EXPECT_THROW(layout.At(layout.total()), RangeError);

  std::vector<float> buf(static_cast<size_t>(layout.total()));
  const ParameterTensors<float> v = MakeParameterViews(testing::ModelOf(c), layout, buf.data());
  EXPECT_EQ(v.layers[2].wqkv, buf.data() + q.offset);
  EXPECT_EQ(v.layers[2].bqkv, buf.data() + layout.Find("blk.2.attn_q.bias").offset);
  EXPECT_EQ(v.output, buf.data() + layout.Find("output.weight").offset);
  EXPECT_EQ(v.position_embd, buf.data() + layout.Find("position_embd.weight").offset);
  c.tied_embeddings = true;
  const ParameterLayout tied(testing::ModelOf(c));
  std::vector<float> buf2(static_cast<size_t>(tied.total()));
  const ParameterTensors<float> t = MakeParameterViews(testing::ModelOf(c), tied, buf2.data());
  EXPECT_EQ(t.output, t.token_embd);
}

}  // namespace
}  // namespace posenc
