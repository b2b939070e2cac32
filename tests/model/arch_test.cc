// Every architecture fixture (the shared random-weight models of eleven families, as Hugging Face folders and as
// llama.cpp's converter writes them) evaluated by posenc equals the independent numpy oracle
// (tests/oracle/arch_oracle.py, its numbers in tests/data/arch_ref.json): ppl and position buckets within 1e-4
// relative under posenc's protocol, at short contexts with the file's own RoPE and past L0 with every method; the
// token stream's first ids; the BF16 GGUF equal to the F32 one within 1e-5; and the variant cases (sliding
// windows on and off, BOS rules, llama.cpp's YaRN keys, Gemma 3's layer pattern, files that must be refused).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/evaluate.h"
#include "posenc/formats/gguf.h"
#include "posenc/formats/gguf_writer.h"
#include "posenc/model/loader.h"
#include "test_util.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::ExpectThrowWith;

// Relative tolerance against the oracle: both compute the same float32 model; they differ in summation order
// (BLAS vs numpy's pairwise sums, the attention's online softmax, exp/tanh implementations), i.e. relative errors
// of a few ulp per activation, which these random, peaked models amplify to at most ~1e-6 in ppl (the largest
// seen over every fixture is 5e-7). 1e-4 is the bound the model must meet; a wrong positional detail moves ppl by
// 1e-2 and more on these fixtures (arch_ppl.json's sensitivity rows).
constexpr double kRelTol = 1e-4;

const json& Reference() {
  static const json ref = [] {
    std::ifstream in(std::string(POSENC_TEST_DATA_DIR) + "/arch_ref.json");
    return json::parse(in);
  }();
  return ref;
}

std::string ArchDir() { return std::string(POSENC_SHARED_DIR) + "/models/arch"; }
std::string Text() { return std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt"; }

// Where a fixture of arch_ref.json lives.
std::string FixturePath(const std::string& name) {
  if (name.rfind("stories260K", 0) == 0) return testing::ModelFixture(name);
  if (name.rfind("llama-mini-rand", 0) == 0) return testing::SharedModel(name);
  return ArchDir() + "/" + name;
}

double Rel(double got, double want) { return std::fabs(got - want) / std::fabs(want); }

// Runs posenc's protocol on `model` for every (ctx, method) of `rows` that has a ppl, and compares.
void ExpectRows(const std::string& model, const json& rows, int64_t n_pred, const std::string& tokenizer = "",
                const std::string& what = "") {
  std::map<int64_t, std::vector<RopeMethod>> by_ctx;
  for (const json& r : rows) {
    if (!r.contains("ppl")) continue;
    if (testing::SmallOracle() && r["ctx"].get<int64_t>() > 256) continue;  // the sanitizer build: short contexts
    by_ctx[r["ctx"].get<int64_t>()].push_back(ParseRopeMethod(r["method"].get<std::string>()));
  }
  for (const auto& [ctx, methods] : by_ctx) {
    EvalOptions o;
    o.model_path = model;
    o.tokenizer_path = tokenizer;
    o.text_path = Text();
    o.ctx = {ctx};
    o.methods = methods;
    o.n_pred = n_pred;
    const EvalReport report = RunEval(o);
    for (const EvalRow& row : report.rows) {
      for (const json& r : rows) {
        if (r["ctx"] != row.ctx || r["method"] != RopeMethodName(row.method) || !r.contains("ppl")) continue;
        SCOPED_TRACE(what + " ctx " + std::to_string(row.ctx) + " " + std::string(RopeMethodName(row.method)));
        EXPECT_LT(Rel(row.result.ppl, r["ppl"].get<double>()), kRelTol) << row.result.ppl << " vs " << r["ppl"];
        for (const BucketResult& b : row.result.buckets) {
          const std::string key = std::to_string(b.from) + "-" + std::to_string(b.to);
          if (!r["buckets"].contains(key)) continue;
          EXPECT_LT(Rel(b.ppl, r["buckets"][key]["ppl"].get<double>()), kRelTol) << "bucket " << key;
        }
      }
    }
  }
}

class ArchFixture : public ::testing::TestWithParam<std::string> {};

// Posenc's protocol, the file's own RoPE at 64 and 256 tokens and every method past L0, against the oracle.
TEST_P(ArchFixture, MatchesTheNumpyOracle) {
  const std::string name = GetParam();
  const std::string path = FixturePath(name);
  POSENC_SKIP_IF_ABSENT(path);
  const json& f = Reference()["fixtures"][name];
  const std::string tokenizer =
      name.rfind("stories260K", 0) == 0 ? std::string(POSENC_DATA_DIR) + "/tok512.bin" : std::string();
  // The token stream is the oracle's (its own tokenizers, the file's BOS rule).
  {
    EvalOptions o;
    o.model_path = path;
    o.tokenizer_path = tokenizer;
    o.text_path = Text();
    o.ctx = {64};
    o.methods = {RopeMethod::kNative};
    o.n_pred = 64;
    const EvalReport r = RunEval(o);
    const std::vector<int> first16 = f["stream"]["first_16"].get<std::vector<int>>();
    ASSERT_GE(r.first_ids.size(), first16.size());
    EXPECT_EQ(std::vector<int>(r.first_ids.begin(), r.first_ids.begin() + 16), first16);
    EXPECT_EQ(r.stream_length, f["stream"]["length"].get<int64_t>());
  }
  json rows = f["posenc"];
  if (name == "phi3-F32.gguf") {
    // llama.cpp pads its context to 256, so it takes LongRoPE's long factors even for a 64-token window (the
    // oracle's GGUF row follows it); posenc chooses by the window's length as transformers does, which the
    // folder's row is.
    for (json& r : rows) {
      if (r["ctx"] == 64) r = Reference()["fixtures"]["phi3"]["posenc"][0];
    }
  }
  ExpectRows(path, rows, f["N"].get<int64_t>(), tokenizer, name);
}

// Rows the oracle records as errors are errors here, naming the limit.
TEST(ArchFixtureErrors, LearnedPositionsPastTheTableAndRopeMethodsOnGpt2) {
  for (const char* name : {"gpt2", "gpt2-F32.gguf"}) {
    const std::string path = FixturePath(name);
    POSENC_SKIP_IF_ABSENT(path);
    for (const char* method : {"native", "none", "ntk", "yarn"}) {
      EvalOptions o;
      o.model_path = path;
      o.text_path = Text();
      o.ctx = {512};
      o.methods = {ParseRopeMethod(method)};
      o.n_pred = 512;
      try {
        RunEval(o);
        ADD_FAILURE() << name << " " << method << ": no error";
      } catch (const Error& e) {
        const std::string what = e.what();
        if (std::string(method) == "native" || std::string(method) == "none") {
          EXPECT_NE(what.find("n_positions = 256"), std::string::npos) << what;
        } else {
          EXPECT_NE(what.find("learned table of 256 rows"), std::string::npos) << what;
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, ArchFixture, ::testing::ValuesIn([] {
                           std::vector<std::string> names;
                           for (const auto& [name, f] : Reference()["fixtures"].items()) names.push_back(name);
                           return names;
                         }()),
                         [](const ::testing::TestParamInfo<std::string>& i) {
                           std::string s = i.param;
                           for (char& ch : s) {
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           }
                           return s;
                         });

// BF16 GGUF = F32 GGUF: the converter's BF16 file holds the same values (the folders are BF16), so posenc gives the
// same numbers up to the products' summation order (QuantMatmul on bf16 rows vs sgemm on float32).
TEST(ArchBf16, EqualsTheF32File) {
  for (const auto& [name, ref] : Reference()["bf16_equals_f32"].items()) {
    const std::string bf16 = ArchDir() + "/" + name;
    std::string f32 = name;
    f32.replace(f32.find("BF16"), 4, "F32");
    if (!testing::Exists(bf16) || !testing::Exists(ArchDir() + "/" + f32)) GTEST_SKIP() << "fixtures absent: " << bf16;
    SCOPED_TRACE(name);
    EvalOptions o;
    o.text_path = Text();
    o.ctx = {ref["ctx"].get<int64_t>()};
    o.methods = {RopeMethod::kNative};
    o.n_pred = ref["N"].get<int64_t>();
    o.model_path = bf16;
    const double a = RunEval(o).rows[0].result.ppl;
    o.model_path = ArchDir() + "/" + f32;
    const double b = RunEval(o).rows[0].result.ppl;
    EXPECT_LT(Rel(a, b), 1e-5) << a << " vs " << b;
  }
}

// ---- variants: a fixture with a documented change ------------------------------------------------------------

// A copy of a fixture folder with JSON keys of one of its files replaced (null removes nothing: it is written).
std::string FolderVariant(const testing::TempDir& dir, const std::string& base, const std::string& file,
                          const json& changes) {
  const fs::path out = dir.path / base;
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(ArchDir() + "/" + base)) fs::copy_file(e.path(), out / e.path().filename());
  json j;
  {
    std::ifstream in(out / file);
    j = json::parse(in);
  }
  for (const auto& [k, v] : changes.items()) j[k] = v;
  fs::remove(out / file);
  std::ofstream(out / file) << j.dump(2);
  return out.string();
}

// A copy of a GGUF file with metadata keys replaced or added; tensors unchanged.
std::string GgufVariant(const testing::TempDir& dir, const std::string& base, const json& keys) {
  const GgufFile g = GgufFile::Open(ArchDir() + "/" + base);
  GgufWriter w;
  w.CopyMetadata(g);
  for (const json& k : keys) {
    const std::string type = k["type"];
    const std::string key = k["key"];
    if (type == "string") {
      w.Set(key, GgufWriteValue::String(k["value"].get<std::string>()));
    } else if (type == "u32") {
      w.Set(key, GgufWriteValue::UInt32(k["value"].get<uint32_t>()));
    } else {
      const float v = k["value"].is_string() ? std::nanf("") : k["value"].get<float>();
      w.Set(key, GgufWriteValue::Float32(v));
    }
  }
  for (const GgufTensorInfo& t : g.tensors()) {
    w.AddTensorBytes(std::string(t.name), t.type, t.Shape(), std::span<const uint8_t>(t.data, t.n_bytes));
  }
  const std::string path = dir / ("variant-" + base);
  w.WriteFile(path, /*overwrite=*/true);
  return path;
}

const json& Variant(const std::string& name) {
  for (const json& v : Reference()["variants"]) {
    if (v["name"] == name) return v;
  }
  throw std::runtime_error("no variant " + name);
}

void ExpectVariant(const std::string& model, const std::string& name) {
  const json& v = Variant(name);
  ExpectRows(model, v["posenc"], v["N"].get<int64_t>(), "", name);
}

TEST(ArchVariants, MistralSlidingWindowOnAndOff) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/mistral");
  testing::TempDir dir("arch_mistral");
  ExpectVariant(ArchDir() + "/mistral", "mistral as shipped (sliding_window 32 on every layer)");
  ExpectVariant(FolderVariant(dir, "mistral", "config.json", {{"sliding_window", nullptr}}), "mistral, full attention");
  // The window is stated by the loader.
  const ModelFile m = LoadModelFile(ArchDir() + "/mistral");
  for (const LayerSpec& l : m.config.layers) EXPECT_EQ(l.sliding_window, 32);
}

TEST(ArchVariants, Qwen2SlidingWindowLayers) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/qwen2.5");
  for (int layers : {2, 1, 0}) {
    testing::TempDir dir("arch_qwen_window");
    const std::string model = FolderVariant(
        dir, "qwen2.5", "config.json",
        {{"use_sliding_window", true}, {"sliding_window", 32}, {"max_window_layers", layers}});
    ExpectVariant(model, "qwen2.5, use_sliding_window true, sliding_window 32, max_window_layers " +
                             std::to_string(layers));
    const ModelFile m = LoadModelFile(model);
    for (int64_t i = 0; i < m.config.n_layers; ++i) {
      EXPECT_EQ(m.config.layers[static_cast<size_t>(i)].sliding_window, i >= layers ? 32 : 0) << i;
    }
  }
}

TEST(ArchVariants, Qwen25BosRules) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/qwen2.5");
  ExpectVariant(ArchDir() + "/qwen2.5", "qwen2.5 as shipped (bos_token null: no BOS)");
  testing::TempDir dir("arch_qwen_bos");
  ExpectVariant(FolderVariant(dir, "qwen2.5", "tokenizer_config.json",
                              {{"add_bos_token", true}, {"bos_token", "<|endoftext|>"}}),
                "qwen2.5 with a BOS");
  testing::TempDir bad("arch_qwen_bos_null");
  EvalOptions o;
  o.model_path = FolderVariant(bad, "qwen2.5", "tokenizer_config.json", {{"add_bos_token", true}});
  o.text_path = Text();
  o.ctx = {128};
  o.methods = {RopeMethod::kNative};
  o.n_pred = 128;
  ExpectThrowWith<ConfigError>([&] { RunEval(o); }, {"tokenizer_config.json", "add_bos_token", "bos_token is null"});
}

TEST(ArchVariants, Gemma3LayerPatternInEveryForm) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/gemma3-v5");
  ExpectVariant(ArchDir() + "/gemma3-v5", "gemma3-v5 (rope_parameters nested per layer type, layer_types)");
  ExpectVariant(ArchDir() + "/gemma3",
                "gemma3 (v4 form: rope_theta, rope_scaling, rope_local_base_freq, sliding_window_pattern)");
  testing::TempDir dir("arch_gemma3_pattern");
  const json& v = Variant("gemma3-F32.gguf with sliding_window_pattern 3");
  ExpectVariant(GgufVariant(dir, "gemma3-F32.gguf", v["how"]["append_or_replace_keys"]), v["name"]);
  // Per layer type: the v5 form's global layer has theta 1e6 with linear 8, the local ones theta 1e4.
  const ModelFile m = LoadModelFile(ArchDir() + "/gemma3-v5");
  EXPECT_EQ(m.config.layers[2].type, "full_attention");
  EXPECT_EQ(m.config.layers[2].rope_params.rope_theta, 1e6);
  EXPECT_EQ(m.config.layers[2].rope_params.rope_type, RopeType::kLinear);
  EXPECT_EQ(m.config.layers[0].rope_params.rope_theta, 1e4);
  EXPECT_EQ(m.config.layers[0].sliding_window, 32);
  EXPECT_EQ(m.config.layers[2].sliding_window, 0);
}

// llama.cpp's YaRN keys on a llama GGUF: the magnitude is attn_factor * (1 + 0.1 ln s), and yarn_beta_fast is
// applied as ggml's beta_fast (llama.cpp's own meaning of the key).
TEST(ArchVariants, LlamaCppYarnKeys) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/mistral-F32.gguf");
  for (const char* name : {"mistral-F32.gguf yarn factor 4, original_context_length 256, attn_factor 0.5, "
                           "yarn_beta_fast 4.0: key applied",
                           "mistral-F32.gguf yarn factor 4, original_context_length 256, attn_factor 1.0, "
                           "yarn_beta_fast 4.0: key applied",
                           "mistral-F32.gguf yarn factor 4, original_context_length 256, attn_factor 1.0, "
                           "yarn_beta_fast 32.0: key applied"}) {
    testing::TempDir dir("arch_yarn");
    const json& v = Variant(name);
    ExpectVariant(GgufVariant(dir, "mistral-F32.gguf", v["how"]["append_or_replace_keys"]), name);
  }
  for (const char* name : {"mistral-F32.gguf yarn with attn_factor 0.0", "mistral-F32.gguf yarn with attn_factor nan"}) {
    testing::TempDir dir("arch_yarn_bad");
    const json& v = Variant(name);
    const std::string path = GgufVariant(dir, "mistral-F32.gguf", v["how"]["append_or_replace_keys"]);
    ExpectThrowWith<ConfigError>([&] { LoadModelFile(path); }, {"llama.rope.scaling.attn_factor", "finite and > 0"});
  }
}

// A GGUF whose block_count says fewer layers than its tensors hold is refused (llama.cpp: "wrong number of
// tensors"), not run with a layer dropped.
TEST(ArchVariants, BlockCountBelowTheLayersHeld) {
  testing::TempDir dir("arch_block_count");
  const GgufFile g = GgufFile::Open(testing::ModelFixture("stories260K-F32.gguf"));
  GgufWriter w;
  w.CopyMetadata(g);
  w.Set("llama.block_count", GgufWriteValue::UInt32(4));
  for (const GgufTensorInfo& t : g.tensors()) {
    w.AddTensorBytes(std::string(t.name), t.type, t.Shape(), std::span<const uint8_t>(t.data, t.n_bytes));
  }
  const std::string path = dir / "four.gguf";
  w.WriteFile(path);
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(path); },
                               {"four.gguf", "llama.block_count = 4", "tensors of layer 4", "blk.4."});
  EXPECT_EQ(LoadModelFile(path, LoadOptions{/*allow_unused_tensors=*/true}).config.n_layers, 4);
  // The command line: eval refuses it; with --allow-unused-tensors eval and generate run and print the note
  // (stderr merged into the captured output).
  const std::string eval = "eval --model " + path + " --ctx 64 --methods none --tokens 64";
  const testing::CliResult refused = testing::RunPosenc(eval);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.out.find("tensors of layer 4"), std::string::npos) << refused.out;
  const testing::CliResult ran = testing::RunPosenc(eval + " --allow-unused-tensors");
  EXPECT_EQ(ran.status, 0) << ran.out;
  EXPECT_NE(ran.out.find("note: llama.block_count = 4 but the file holds tensors of layer 4"), std::string::npos)
      << ran.out;
  const testing::CliResult generated =
      testing::RunPosenc("generate --model " + path + " -n 8 -t 0 --allow-unused-tensors");
  EXPECT_EQ(generated.status, 0) << generated.out;
  EXPECT_NE(generated.out.find("note: llama.block_count = 4"), std::string::npos) << generated.out;
}

// Architectures posenc does not run are refused naming why.
TEST(ArchVariants, OutOfScopeFamiliesAreNamed) {
  testing::TempDir dir("arch_scope");
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/qwen3");
  ExpectThrowWith<ConfigError>(
      [&] { LoadModelFile(FolderVariant(dir, "qwen3", "config.json", {{"architectures", {"Qwen3MoeForCausalLM"}}})); },
      {"Qwen3MoeForCausalLM", "mixture-of-experts", "out of posenc's scope"});
}

// A positional key the architecture does not apply is an error, not a default.
TEST(ArchVariants, UnappliedPositionalKeysAreRefused) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/olmo2");
  testing::TempDir dir("arch_keys");
  ExpectThrowWith<ConfigError>(
      [&] { LoadModelFile(FolderVariant(dir, "olmo2", "config.json", {{"sliding_window", 64}})); },
      {"config.json", "sliding_window", "not applied"});
  testing::TempDir dir2("arch_keys2");
  ExpectThrowWith<ConfigError>(
      [&] {
        LoadModelFile(FolderVariant(dir2, "qwen3", "config.json",
                                    {{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}, {"beta_fast", 4}}}}));
      },
      {"config.json", "beta_fast", "not used by rope_type 'linear'"});
}

// Qwen2.5-1M's dual_chunk_attention_config: read as the defaults of --methods dca (native runs without it, as
// transformers), its sparse prefill keys noted; a malformed one is refused naming the key; an architecture that
// does not read it refuses it.
TEST(ArchVariants, DualChunkAttentionConfigIsReadForDca) {
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/qwen2.5");
  testing::TempDir dir("arch_dca");
  const json dca = {{"chunk_size", 96}, {"local_size", 16}, {"original_max_position_embeddings", 2048},
                    {"sparse_attention_enabled", true}, {"sparse_attention_threshold", 32}};
  const std::string model = FolderVariant(dir, "qwen2.5", "config.json", {{"dual_chunk_attention_config", dca}});
  const ModelFile mf = LoadModelFile(model);
  ASSERT_TRUE(mf.config.dual_chunk.has_value());
  EXPECT_EQ(mf.config.dual_chunk->chunk_size, 96);
  EXPECT_EQ(mf.config.dual_chunk->local_size, 16);
  EXPECT_EQ(mf.config.dual_chunk->original_max_position_embeddings, 2048);
  EXPECT_EQ(mf.config.train_ctx, 2048);  // the folder's rope states no original_max_position_embeddings
  std::string notes;
  for (const std::string& w : mf.warnings) notes += w + "\n";
  EXPECT_NE(notes.find("sparse_attention_enabled, sparse_attention_threshold (sparse prefill) not applied"),
            std::string::npos) << notes;
  EXPECT_NE(notes.find("chunk_size 96, local_size 16"), std::string::npos) << notes;

  EvalOptions o;
  o.model_path = model;
  o.text_path = std::string(POSENC_DATA_DIR) + "/text/tinystories_val_stories.txt";
  o.ctx = {256};
  o.n_pred = 256;
  o.methods = {RopeMethod::kDualChunk};
  EXPECT_EQ(RunEval(o).rows[0].parameters, "chunk_size 96, local_size 16");
  o.method_options.position_map.local_size = 8;  // the user's value wins, the file's chunk_size stays
  EXPECT_EQ(RunEval(o).rows[0].parameters, "chunk_size 96, local_size 8");

  const struct {
    const char* name;
    json config;
    std::vector<std::string> message;
  } bad[] = {
      {"no_local", {{"chunk_size", 96}}, {"dual_chunk_attention_config", "'local_size' is missing"}},
      {"unknown", {{"chunk_size", 96}, {"local_size", 16}, {"chunk_stride", 3}},
       {"dual_chunk_attention_config", "unknown key 'chunk_stride'"}},
      {"small", {{"chunk_size", 16}, {"local_size", 16}}, {"chunk_size > local_size", "16"}},
      {"negative", {{"chunk_size", 96}, {"local_size", -2}}, {"local_size", "-2"}},
      {"huge", {{"chunk_size", 18446744073709551615ull}, {"local_size", 16}}, {"chunk_size", "18446744073709551615"}},
      {"not_object", 96, {"dual_chunk_attention_config must be an object", "96"}},
  };
  for (const auto& b : bad) {
    SCOPED_TRACE(b.name);
    testing::TempDir d(std::string("arch_dca_") + b.name);
    const std::string path = FolderVariant(d, "qwen2.5", "config.json", {{"dual_chunk_attention_config", b.config}});
    ExpectThrowWith<ConfigError>([&] { LoadModelFile(path); }, b.message);
  }
  POSENC_SKIP_IF_ABSENT(ArchDir() + "/qwen3");
  testing::TempDir d3("arch_dca_qwen3");
  ExpectThrowWith<ConfigError>(
      [&] { LoadModelFile(FolderVariant(d3, "qwen3", "config.json", {{"dual_chunk_attention_config", dca}})); },
      {"dual_chunk_attention_config", "not applied"});
}

}  // namespace
}  // namespace posenc
