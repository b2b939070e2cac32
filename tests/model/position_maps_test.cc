// The training-free position maps (Self-Extend, Dual Chunk Attention, ReRoPE, Leaky ReRoPE, attention sinks,
// LM-Infinite): posenc eval
// under each against the numpy oracle (tests/data/position_maps_ref.json, from tests/oracle/arch_oracle.py
// position-maps, written from the papers), the maps' identities (a map that changes nothing equals plain RoPE),
// the attention under a one-set map against CausalAttention, and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/formats_test_util.h"
#include "posenc/attention/attention.h"
#include "posenc/attention/mapped_attention.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"
#include "posenc/model/generate.h"
#include "posenc/model/position_maps.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::ExpectThrowWith;

// The oracle and posenc differ in float32 summation order and RoPE's float64 inv_freq (the oracle) against its
// float32 rounding (posenc); over a few thousand scored tokens that moves the ppl by ~1e-6 relative, well inside
// the 1e-4 the maps are specified to.
constexpr double kRelTol = 1e-4;

std::string Text() { return std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt"; }
std::string Tok512() { return std::string(POSENC_DATA_DIR) + "/tok512.bin"; }
double Rel(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

const json& Reference() {
  static const json ref = [] {
    std::ifstream in(std::string(POSENC_TEST_DATA_DIR) + "/position_maps_ref.json");
    return json::parse(in);
  }();
  return ref;
}

PositionMapOptions OptionsOf(const json& map) {
  PositionMapOptions o;
  if (map.contains("group")) o.group = map["group"].get<int64_t>();
  if (map.contains("window")) o.window = map["window"].get<int64_t>();
  if (map.contains("leak")) o.leak = map["leak"].get<double>();
  if (map.contains("sinks")) o.sinks = map["sinks"].get<int64_t>();
  if (map.contains("global")) o.n_global = map["global"].get<int64_t>();
  if (map.contains("chunk_size")) o.chunk_size = map["chunk_size"].get<int64_t>();
  if (map.contains("local_size")) o.local_size = map["local_size"].get<int64_t>();
  return o;
}

EvalOptions Options(const std::string& model, const std::string& tokenizer, int64_t ctx, int64_t n_pred,
                    std::vector<RopeMethod> methods) {
  EvalOptions o;
  o.model_path = model;
  o.tokenizer_path = tokenizer;
  o.text_path = Text();
  o.ctx = {ctx};
  o.n_pred = n_pred;
  o.methods = std::move(methods);
  return o;
}

void ExpectFixture(const std::string& name, const std::string& model, const std::string& tokenizer) {
  const json& f = Reference()["fixtures"][name];
  for (const json& row : f["rows"]) {
    const std::string method = row["method"].get<std::string>();
    SCOPED_TRACE(name + " ctx " + std::to_string(row["ctx"].get<int64_t>()) + " " + method);
    EvalOptions o = Options(model, tokenizer, row["ctx"].get<int64_t>(), f["N"].get<int64_t>(),
                            {ParseRopeMethod(method)});
    o.method_options.position_map = OptionsOf(row["map"]);
    const EvalReport report = RunEval(o);
    ASSERT_EQ(report.rows.size(), 1u);
    EXPECT_EQ(report.stream_length, f["stream"]["length"].get<int64_t>());
    const EvalRow& r = report.rows[0];
    EXPECT_LT(Rel(r.result.ppl, row["ppl"].get<double>()), kRelTol) << r.result.ppl << " vs " << row["ppl"];
    for (const BucketResult& b : r.result.buckets) {
      const std::string key = std::to_string(b.from) + "-" + std::to_string(b.to);
      ASSERT_TRUE(row["buckets"].contains(key)) << key;
      EXPECT_LT(Rel(b.ppl, row["buckets"][key]["ppl"].get<double>()), kRelTol) << "bucket " << key;
    }
    EXPECT_FALSE(r.parameters.empty());
  }
}

TEST(PositionMapOracle, Stories260K) {
  ExpectFixture("stories260K-hf", testing::ModelFixture("stories260K-hf"), Tok512());
}

TEST(PositionMapOracle, LlamaMiniRand) {
  const std::string path = testing::SharedModel("llama-mini-rand");
  POSENC_SKIP_IF_ABSENT(path);
  ExpectFixture("llama-mini-rand", path, "");
}

// A map whose first set covers every pair is plain RoPE: Self-Extend with group 1 (grouped = plain
// positions), Dual Chunk Attention with one chunk holding the window, ReRoPE / Leaky ReRoPE / sinks /
// LM-Infinite with a window reaching the whole context. The
// rows then equal the `native` row up to the float32 rounding of the on-the-fly rotation against the table
// (one ulp per cos/sin).
TEST(PositionMapIdentities, MapsThatChangeNothingArePlainRope) {
  const int64_t ctx = 256, n = 512;
  const EvalReport base = RunEval(Options(testing::ModelFixture("stories260K-hf"), Tok512(), ctx, n,
                                          {RopeMethod::kNative}));
  struct Case {
    RopeMethod method;
    PositionMapOptions options;
  };
  const Case cases[] = {
      {RopeMethod::kSelfExtend, {.group = 1, .window = 16}},
      {RopeMethod::kDualChunk, {.chunk_size = ctx + 40, .local_size = 40}},
      {RopeMethod::kReRope, {.window = ctx}},
      {RopeMethod::kLeakyReRope, {.window = ctx, .leak = 3.0}},
      {RopeMethod::kSinks, {.window = ctx, .sinks = 4}},
      {RopeMethod::kLmInfinite, {.window = ctx, .n_global = 3}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(RopeMethodName(c.method)));
    EvalOptions o = Options(testing::ModelFixture("stories260K-hf"), Tok512(), ctx, n, {c.method});
    o.method_options.position_map = c.options;
    const EvalReport r = RunEval(o);
    EXPECT_LT(Rel(r.rows[0].result.ppl, base.rows[0].result.ppl), 1e-6)
        << r.rows[0].result.ppl << " vs " << base.rows[0].result.ppl;
  }
}

// The defaults stated in MakePositionMap, and the parameters a report shows.
TEST(PositionMapDefaults, FromL0AndTheContext) {
  EXPECT_EQ(MakePositionMap("self-extend", {}, 2048, 512)->parameters(), "group 5, window 128");  // 384*5+128
  EXPECT_EQ(MakePositionMap("self-extend", {}, 256, 512)->parameters(), "group 1, window 128");
  EXPECT_EQ(MakePositionMap("dca", {}, 2048, 512)->parameters(), "chunk_size 384, local_size 32");
  EXPECT_EQ(MakePositionMap("rerope", {}, 2048, 512)->parameters(), "window 256");
  EXPECT_EQ(MakePositionMap("leaky-rerope", {}, 2048, 512)->parameters(), "window 256, leak 7");
  EXPECT_EQ(MakePositionMap("sinks", {}, 2048, 512)->parameters(), "sinks 4, window 508");
  EXPECT_EQ(MakePositionMap("lm-infinite", {}, 2048, 512)->parameters(), "global 10, window 512");
}

// Self-Extend's grouped positions (LongLM eq. 4): the seam at distance window continues the neighbour
// distances; sinks' cache indices; LM-Infinite's cap.
TEST(PositionMapDefinitions, PositionsAndSelection) {
  const auto se = MakeSelfExtendMap(4, 8);
  EXPECT_EQ(se->Select(20, 13), 0);  // d = 7 < 8: neighbour
  EXPECT_EQ(se->Select(20, 12), 1);
  EXPECT_EQ(se->QueryPosition(1, 20), 20 / 4 + 8 - 8 / 4);
  EXPECT_EQ(se->KeyPosition(1, 12), 3);
  const auto sinks = MakeSinksMap(2, 4);
  EXPECT_EQ(sinks->Select(10, 7), 0);
  EXPECT_EQ(sinks->Select(10, 6), -1);
  EXPECT_EQ(sinks->Select(10, 1), 1);
  EXPECT_EQ(sinks->QueryPosition(1, 10) - sinks->KeyPosition(1, 1), 5 - 1);  // cache index 2 + 4 - 1 = 5
  EXPECT_EQ(sinks->QueryPosition(1, 4) - sinks->KeyPosition(1, 0), 4);       // cache not yet full
  const auto lmi = MakeLmInfiniteMap(1, 16);
  EXPECT_EQ(lmi->Select(100, 0), 1);
  EXPECT_EQ(lmi->Select(100, 1), -1);
  EXPECT_EQ(lmi->QueryPosition(1, 100) - lmi->KeyPosition(1, 0), 16);
  // Dual Chunk Attention, chunks of 10 - 3 = 7: keys at j mod 7; the query at i mod 7 in its own chunk, at
  // min(i mod 7 + 7, 10) against the chunk before, at min(13, 10) = 10 against earlier ones.
  const auto dca = MakeDualChunkMap(10, 3);
  EXPECT_EQ(dca->n_sets(), 3);
  EXPECT_EQ(dca->Select(20, 14), 0);  // chunk 2 = [14, 21)
  EXPECT_EQ(dca->Select(20, 13), 1);
  EXPECT_EQ(dca->Select(20, 7), 1);
  EXPECT_EQ(dca->Select(20, 6), 2);
  EXPECT_EQ(dca->QueryPosition(0, 20) - dca->KeyPosition(0, 15), 5);  // intra: the true distance
  EXPECT_EQ(dca->QueryPosition(1, 15) - dca->KeyPosition(1, 13), 2);  // successive, 1 + 7 < 10: the true distance
  EXPECT_EQ(dca->QueryPosition(1, 20), 10);                            // successive, 6 + 7 capped at chunk_size
  EXPECT_EQ(dca->QueryPosition(2, 20) - dca->KeyPosition(2, 0), 10);  // inter: one query position
  EXPECT_EQ(dca->KeyPosition(2, 6), 6);
  const auto leaky = MakeLeakyReRopeMap(8, 4.0);
  EXPECT_DOUBLE_EQ(leaky->QueryPosition(1, 40) - leaky->KeyPosition(1, 8), 8 + (32.0 - 8) / 4);
}

// Under a map with one set that keeps every pair, MappedCausalAttention is CausalAttention on q and k rotated
// by the table (the same cos/sin to one ulp; float32 sums in another order): agreement to 1e-5 of the
// output's scale.
class IdentityMap final : public PositionMap {
 public:
  std::string_view name() const override { return "identity"; }
  std::string parameters() const override { return ""; }
  int n_sets() const override { return 1; }
  double QueryPosition(int, int64_t p) const override { return static_cast<double>(p); }
  double KeyPosition(int, int64_t p) const override { return static_cast<double>(p); }
  int Select(int64_t, int64_t) const override { return 0; }
};

TEST(MappedAttention, OneSetEqualsCausalAttention) {
  const int64_t n = 70, heads = 4, kv_heads = 2, hd = 16;
  const AttentionDims dims{heads, kv_heads, hd};
  std::vector<float> q = testing::RandomNormal(static_cast<size_t>(n * heads * hd), 1);
  std::vector<float> k = testing::RandomNormal(static_cast<size_t>(n * kv_heads * hd), 2);
  const std::vector<float> v = testing::RandomNormal(static_cast<size_t>(n * kv_heads * hd), 3);
  RopeParams params;
  params.head_dim = hd;
  params.rotary_dim = 12;  // partial rotary: channels 12..15 pass through
  const RopeFrequencies f = ComputeRopeFrequencies(params);
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = t;
  for (RopeLayout layout : {RopeLayout::kHalfSplit, RopeLayout::kInterleaved}) {
    for (int64_t window : {int64_t{0}, int64_t{9}}) {
      SCOPED_TRACE(std::string(RopeLayoutName(layout)) + " window " + std::to_string(window));
      ScoreOptions options;
      options.window = window;
      options.softcap = window > 0 ? 20.0 : 0.0;
      std::vector<float> got(q.size()), want(q.size());
      const IdentityMap map;
      MappedCausalAttention(dims, {q.data(), n, heads * hd, 0, k.data(), v.data(), n, kv_heads * hd}, positions, map,
                            MappedRope{f.inv_freq.data(), 6, 1.0, layout}, 1.0f, got.data(), heads * hd, options);
      std::vector<float> qr = q, kr = k;
      const CosSinTable table = ComputeCosSin(f, positions);
      ApplyRopeQK(HeadsView::Contiguous(qr.data(), n, heads, hd), HeadsView::Contiguous(kr.data(), n, kv_heads, hd),
                  positions, View(table), layout);
      AttentionScratch scratch;
      CausalAttention(dims, {qr.data(), n, heads * hd, 0, kr.data(), v.data(), n, kv_heads * hd}, 1.0f, want.data(),
                      heads * hd, scratch, options);
      for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << i;
    }
  }
}

TEST(PositionMapErrors, ParametersAndPaths) {
  ExpectThrowWith<ConfigError>([] { MakeSelfExtendMap(0, 8); }, {"self-extend group", ">= 1", "0"});
  ExpectThrowWith<ConfigError>([] { MakeLeakyReRopeMap(8, 0.5); }, {"leaky-rerope leak", "0.5"});
  ExpectThrowWith<ConfigError>([] { MakeLeakyReRopeMap(8, std::nan("")); }, {"leaky-rerope leak", "nan"});
  ExpectThrowWith<ConfigError>([] { MakeSinksMap(-1, 8); }, {"sinks must be >= 0", "-1"});
  ExpectThrowWith<ConfigError>([] { MakeLmInfiniteMap(4, 0); }, {"lm-infinite window", "0"});
  ExpectThrowWith<ConfigError>([] { MakeDualChunkMap(32, 32); }, {"dca chunk_size", "local_size (32)", "32"});
  ExpectThrowWith<ConfigError>([] { MakeDualChunkMap(32, -1); }, {"dca local_size", "-1"});
  ExpectThrowWith<ConfigError>([] { MakeDualChunkMap(int64_t{1} << 40, 16); }, {"dca chunk_size", "2^31"});
  ExpectThrowWith<ConfigError>([] { MakePositionMap("sinks", {.sinks = 600}, 1024, 512); },
                               {"600 sink tokens", "L0 512", "set the window"});
  ExpectThrowWith<ConfigError>([] { MakePositionMap("stretch", {}, 1024, 512); }, {"unknown position map", "stretch"});
  // Through eval: a bad parameter is an error before any window.
  EvalOptions o = Options(testing::ModelFixture("stories260K-hf"), Tok512(), 256, 256, {RopeMethod::kReRope});
  o.method_options.position_map.window = 0;
  ExpectThrowWith<ConfigError>([&] { RunEval(o); }, {"rerope window", "0"});
  // Generation decodes with a KV cache: refused before any work.
  GenerateOptions g;
  g.model_path = testing::ModelFixture("stories260K-hf");
  g.tokenizer_path = Tok512();
  g.method = RopeMethod::kSinks;
  ExpectThrowWith<ConfigError>([&] { Generate(g, {}); }, {"'sinks' is a position map", "KV cache"});
}

}  // namespace
}  // namespace posenc
