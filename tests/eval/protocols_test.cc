// The protocols' windows and scored positions, written out by hand from their definitions (YaRN's
// compute_perplexity windows, llama.cpp's perplexity chunks, posenc's windows), and the summary's averages.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/eval/perplexity.h"
#include "posenc/eval/protocols.h"

namespace posenc {
namespace {

std::vector<int> Range(int from, int to) {
  std::vector<int> v(static_cast<size_t>(to - from));
  std::iota(v.begin(), v.end(), from);
  return v;
}

ProtocolTokens Documents(std::vector<std::vector<int>> docs, int bos, EvalProtocol p) {
  ProtocolTokens t;
  t.protocol = p;
  t.sequences = std::move(docs);
  t.bos = bos;
  t.n_documents = static_cast<int64_t>(t.sequences.size());
  return t;
}

TEST(ProtocolsTest, NamesRoundTrip) {
  for (EvalProtocol p : {EvalProtocol::kPosenc, EvalProtocol::kSliding, EvalProtocol::kLlamaPerplexity,
                         EvalProtocol::kTruncate}) {
    EXPECT_EQ(ParseEvalProtocol(EvalProtocolName(p)), p);
  }
  EXPECT_THROW(ParseEvalProtocol("hf"), ConfigError);
  EXPECT_EQ(ParseWindowAverage("tokens"), WindowAverage::kTokens);
  EXPECT_THROW(ParseWindowAverage("docs"), ConfigError);
}

// One document of 10 tokens (100..109), L = 5 with BOS 1: 4 document tokens per window, windows every 2.
// YaRN: begin 0: end 4, trg_len 4: [1,100..103], all 4 scored (BOS predicts 100); begin 2: end 6, trg_len 2:
// [1,102..105], 104 and 105 scored; begin 4: end 8: [1,104..107], 106, 107; begin 6: end 10 = seq_len:
// [1,106..109], 108, 109; stop.
TEST(ProtocolsTest, SlidingWindowsScoreThePastPreviousEnd) {
  ProtocolOptions o;
  o.protocol = EvalProtocol::kSliding;
  o.stride = 2;
  const ProtocolPlan plan = BuildProtocolPlan(Documents({Range(100, 110)}, 1, o.protocol), 5, o, 0, true);
  ASSERT_EQ(plan.windows.size(), 4u);
  EXPECT_EQ(plan.windows[0].input, (std::vector<int>{1, 100, 101, 102, 103}));
  EXPECT_EQ(plan.windows[0].score_from, 0);
  EXPECT_EQ(plan.windows[0].targets, (std::vector<int>{100, 101, 102, 103}));
  EXPECT_EQ(plan.windows[1].input, (std::vector<int>{1, 102, 103, 104, 105}));
  EXPECT_EQ(plan.windows[1].score_from, 2);  // position 2 (token 103) predicts 104
  EXPECT_EQ(plan.windows[1].targets, (std::vector<int>{104, 105}));
  EXPECT_EQ(plan.windows[3].input, (std::vector<int>{1, 106, 107, 108, 109}));
  EXPECT_EQ(plan.windows[3].targets, (std::vector<int>{108, 109}));
  EXPECT_EQ(plan.n_scored, 10);  // every document token exactly once
  EXPECT_EQ(plan.n_parts, 1);
}

// A stride past L - 1 leaves gaps: windows [1,100..103] and [1,106..109] (begin 6), each scoring all 4.
TEST(ProtocolsTest, SlidingStrideLongerThanTheWindowSkipsTokens) {
  ProtocolOptions o;
  o.protocol = EvalProtocol::kSliding;
  o.stride = 6;
  const ProtocolPlan plan = BuildProtocolPlan(Documents({Range(100, 110)}, 1, o.protocol), 5, o, 0, true);
  ASSERT_EQ(plan.windows.size(), 2u);
  EXPECT_EQ(plan.windows[1].input, (std::vector<int>{1, 106, 107, 108, 109}));
  EXPECT_EQ(plan.windows[1].score_from, 0);
  EXPECT_EQ(plan.windows[1].targets, (std::vector<int>{106, 107, 108, 109}));
}

// Without a BOS a window holds L document tokens and its first token is not predicted.
TEST(ProtocolsTest, SlidingWithoutBos) {
  ProtocolOptions o;
  o.protocol = EvalProtocol::kSliding;
  o.stride = 3;
  const ProtocolPlan plan = BuildProtocolPlan(Documents({Range(100, 108)}, -1, o.protocol), 4, o, 0, true);
  ASSERT_EQ(plan.windows.size(), 3u);
  EXPECT_EQ(plan.windows[0].input, (std::vector<int>{100, 101, 102, 103}));
  EXPECT_EQ(plan.windows[0].score_from, 0);
  EXPECT_EQ(plan.windows[0].targets, (std::vector<int>{101, 102, 103}));
  EXPECT_EQ(plan.windows[1].input, (std::vector<int>{103, 104, 105, 106}));
  EXPECT_EQ(plan.windows[1].targets, (std::vector<int>{104, 105, 106}));
  // begin 6 ends at 8 = seq_len after begin 3 ended at 7: a third window [106, 107] scoring 107.
  EXPECT_EQ(plan.windows[2].input, (std::vector<int>{106, 107}));
  EXPECT_EQ(plan.windows[2].targets, (std::vector<int>{107}));
}

TEST(ProtocolsTest, TruncateAndMinDocTokensAndBudget) {
  ProtocolOptions o;
  o.protocol = EvalProtocol::kTruncate;
  o.min_doc_tokens = 3;
  const ProtocolTokens t = Documents({Range(100, 110), Range(200, 202), Range(300, 303), Range(400, 420)}, 1,
                                     o.protocol);
  const ProtocolPlan plan = BuildProtocolPlan(t, 5, o, 0, true);
  ASSERT_EQ(plan.windows.size(), 3u);  // the 2-token document is dropped
  EXPECT_EQ(plan.part_source, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(plan.windows[0].input, (std::vector<int>{1, 100, 101, 102, 103}));
  EXPECT_EQ(plan.windows[0].targets, (std::vector<int>{100, 101, 102, 103}));
  EXPECT_EQ(plan.windows[1].input, (std::vector<int>{1, 300, 301, 302}));
  EXPECT_EQ(plan.windows[1].unit, 1);
  // Budget N = 12: documents until their tokens reach 12 (10, then 3 more: stop).
  const ProtocolPlan budget = BuildProtocolPlan(t, 5, o, 12, false);
  EXPECT_EQ(budget.part_source, (std::vector<int64_t>{0, 2}));
  o.min_doc_tokens = 100;
  EXPECT_THROW(BuildProtocolPlan(t, 5, o, 0, true), ConfigError);
}

// llama.cpp: chunks of L, first token replaced by BOS, logits at L/2 .. L-2 scoring tokens L/2+1 .. L-1.
TEST(ProtocolsTest, LlamaPerplexityChunks) {
  ProtocolOptions o;
  o.protocol = EvalProtocol::kLlamaPerplexity;
  ProtocolTokens t = Documents({Range(100, 125)}, 1, o.protocol);
  const ProtocolPlan plan = BuildProtocolPlan(t, 8, o, 16, false);  // N / L = 2 chunks
  ASSERT_EQ(plan.windows.size(), 2u);
  EXPECT_EQ(plan.windows[1].input, (std::vector<int>{1, 109, 110, 111, 112, 113, 114, 115}));
  EXPECT_EQ(plan.windows[1].score_from, 4);
  EXPECT_EQ(plan.windows[1].targets, (std::vector<int>{113, 114, 115}));
  o.chunks = 3;
  EXPECT_EQ(BuildProtocolPlan(t, 8, o, 16, false).windows.size(), 3u);
  o.chunks = 4;  // 25 tokens hold 3 chunks of 8
  EXPECT_THROW(BuildProtocolPlan(t, 8, o, 16, false), ConfigError);
  o.chunks.reset();
  EXPECT_EQ(BuildProtocolPlan(t, 8, o, 0, true).windows.size(), 3u);
  EXPECT_THROW(BuildProtocolPlan(t, 16, o, 0, true), ConfigError);  // fewer than 2 L tokens, as llama.cpp
  t.bos = -1;  // a vocabulary without BOS keeps the chunk's own first token
  EXPECT_EQ(BuildProtocolPlan(t, 8, o, 16, false).windows[1].input[0], 108);
}

TEST(ProtocolsTest, PosencWindowsAndErrors) {
  ProtocolOptions o;
  ProtocolTokens t = Documents({Range(0, 21)}, 1, EvalProtocol::kPosenc);
  const ProtocolPlan plan = BuildProtocolPlan(t, 5, o, 20, false);
  ASSERT_EQ(plan.windows.size(), 4u);
  EXPECT_EQ(plan.windows[3].input, (std::vector<int>{15, 16, 17, 18, 19}));
  EXPECT_EQ(plan.windows[3].targets, (std::vector<int>{16, 17, 18, 19, 20}));
  EXPECT_EQ(BuildProtocolPlan(t, 6, o, 0, true).windows.size(), 3u);  // --tokens all: every whole window
  EXPECT_THROW(BuildProtocolPlan(t, 6, o, 20, false), ConfigError);  // 20 % 6
  EXPECT_THROW(BuildProtocolPlan(t, 5, o, 25, false), ConfigError);  // text too short
  EXPECT_THROW(BuildProtocolPlan(t, 1, o, 20, false), ConfigError);
  o.protocol = EvalProtocol::kSliding;
  EXPECT_THROW(BuildProtocolPlan(t, 5, o, 20, false), ConfigError);  // tokens read for another protocol
}

// Two documents: the first with windows of means 1 and 3 (1 and 3 tokens), the second one window of mean 5.
TEST(ProtocolsTest, SummaryAveragesWindowsOrTokensAndCountsDocumentsAsUnits) {
  ProtocolPlan plan;
  plan.protocol = EvalProtocol::kSliding;
  plan.ctx = 8;
  plan.n_parts = 2;
  plan.part_source = {0, 4};
  auto window = [](int64_t unit, int64_t from, int n) {
    ProtocolWindow w;
    w.unit = unit;
    w.score_from = from;
    w.targets.assign(static_cast<size_t>(n), 0);
    return w;
  };
  plan.windows = {window(0, 0, 1), window(0, 5, 3), window(1, 0, 2)};
  const std::vector<std::vector<double>> nll = {{1.0}, {2.0, 3.0, 4.0}, {4.0, 6.0}};
  const PerplexityResult w = SummarizeProtocol(plan, nll, 4);
  EXPECT_DOUBLE_EQ(w.mean_nll, (1.0 + 3.0 + 5.0) / 3);  // mean of window means
  EXPECT_EQ(w.n_units, 2);
  ASSERT_EQ(w.parts.size(), 2u);
  EXPECT_EQ(w.parts[1].index, 4);
  EXPECT_DOUBLE_EQ(w.parts[0].mean_nll, 2.0);  // mean of its windows' means (1 and 3)
  EXPECT_DOUBLE_EQ(w.parts[1].mean_nll, 5.0);
  EXPECT_DOUBLE_EQ(w.nll_se, std::sqrt(((2.0 - 3.5) * (2.0 - 3.5) + (5.0 - 3.5) * (5.0 - 3.5)) / 1) / std::sqrt(2.0));
  plan.average = WindowAverage::kTokens;
  const PerplexityResult t = SummarizeProtocol(plan, nll, 4);
  EXPECT_DOUBLE_EQ(t.mean_nll, 20.0 / 6);
  EXPECT_DOUBLE_EQ(t.parts[0].mean_nll, 2.5);
  // Buckets of L0 = 4 at ctx 8: [0,2) [2,4) [4,8); positions scored: 0 | 5,6,7 | 0,1.
  ASSERT_EQ(t.buckets.size(), 2u);  // [2, 4) holds nothing and is left out
  EXPECT_EQ(t.buckets[0].count, 3);
  EXPECT_DOUBLE_EQ(t.buckets[1].mean_nll, 3.0);
  // llama-perplexity: every token is a unit; the running ppl per chunk.
  plan.protocol = EvalProtocol::kLlamaPerplexity;
  const PerplexityResult l = SummarizeProtocol(plan, nll, 4);
  EXPECT_EQ(l.n_units, 6);
  EXPECT_DOUBLE_EQ(l.parts[0].running_ppl, std::exp(10.0 / 4));
  EXPECT_DOUBLE_EQ(l.parts[1].running_ppl, std::exp(20.0 / 6));
  EXPECT_THROW(SummarizeProtocol(plan, {{1.0}}, 4), ShapeError);
}

}  // namespace
}  // namespace posenc
