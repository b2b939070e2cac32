// `posenc inspect --config` on every config of the reference file (examples/configs/): the printed JSON's
// rope_type, rotary_dim, inv_freq (1 ulp of HF float32), attention_factor and cos/sin shape, plus the text
// output and a bad-input exit status.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "formats/formats_test_util.h"
#include "posenc/formats/gguf.h"
#include "posenc/formats/gguf_writer.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;

using testing::CliResult;

CliResult Cli(const std::string& args) { return testing::RunPosenc(args); }

std::string ConfigPath(const std::string& name) {
  return std::string(POSENC_SOURCE_DIR) + "/examples/configs/" + name + ".json";
}

TEST(InspectCli, EveryReferenceConfigResolvesToHfValues) {
  const json ref = testing::LoadTestJson("hf_rope_reference.json");
  int configs = 0;
  for (const auto& [name, cfg] : ref.at("configs").items()) {
    for (const json& run : cfg.at("runs")) {
      if (run.at("precision") != "float32") continue;
      SCOPED_TRACE(name + " " + run.at("label").get<std::string>());
      const auto positions = run.at("positions").get<std::vector<int64_t>>();
      std::string pos_arg;
      for (int64_t p : positions) {
        if (!pos_arg.empty()) pos_arg += ',';
        pos_arg += std::to_string(p);
      }
      std::string args = "inspect --json --precision hf --config " + ConfigPath(name) + " --positions " + pos_arg;
      if (!run.at("seq_len").is_null()) args += " --seq-len " + std::to_string(run.at("seq_len").get<int64_t>());
      const CliResult r = Cli(args);
      ASSERT_EQ(r.status, 0) << r.out;
      const json j = json::parse(r.out);
      EXPECT_EQ(j.at("rope_type"), cfg.at("rope_type"));
      EXPECT_EQ(j.at("rotary_dim"), cfg.at("rotary_dim"));
      const auto inv = j.at("inv_freq").get<std::vector<double>>();
      const auto inv_hf = run.at("inv_freq").get<std::vector<double>>();
      ASSERT_EQ(inv.size(), inv_hf.size());
      for (size_t i = 0; i < inv.size(); ++i) {
        EXPECT_LE(testing::UlpDistance(static_cast<float>(inv[i]), static_cast<float>(inv_hf[i])), 1) << i;
      }
      EXPECT_DOUBLE_EQ(j.at("attention_factor").get<double>(), run.at("attention_scaling").get<double>());
      EXPECT_EQ(j.at("positions").get<std::vector<int64_t>>(), positions);
      ASSERT_EQ(j.at("cos").size(), positions.size());
      ASSERT_EQ(j.at("cos").at(0).size(), inv.size());
      // position 0: cos = attention factor, sin = 0, exactly (HF's table row 0 too)
      EXPECT_EQ(j.at("cos").at(0).at(0).get<double>(), run.at("cos").at(0).at(0).get<double>());
      EXPECT_EQ(j.at("sin").at(0).at(0).get<double>(), 0.0);
    }
    ++configs;
  }
  EXPECT_EQ(configs, 9);
}

TEST(InspectCli, TextOutputShowsRegimesAndFactors) {
  const CliResult r = Cli("inspect --config " + ConfigPath("llama3.1-8b") + " --positions 0,1,4095");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("llama3"), std::string::npos);
  EXPECT_NE(r.out.find("blended"), std::string::npos);       // pairs 29..34 are smoothed
  EXPECT_NE(r.out.find("interpolated"), std::string::npos);  // low frequencies divided by 8
  EXPECT_NE(r.out.find("position 4095"), std::string::npos);
  const CliResult ds = Cli("inspect --config " + ConfigPath("deepseek-v3"));
  EXPECT_NE(ds.out.find("1.8738542070926"), std::string::npos);  // softmax multiplier
  EXPECT_NE(ds.out.find("interleaved"), std::string::npos);
}

TEST(InspectCli, FlagsWithoutConfig) {
  const CliResult r = Cli("inspect --json --head-dim 128 --rope-type ntk --factor 4 --rope-theta 10000");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(r.out);
  // NTK-aware: base' = 10000 * 4^(128/126); the last pair is exactly the plain one divided by 4 (in exact
  // arithmetic): inv_63 = base'^(-126/128) = 10000^(-126/128) / 4.
  const double last = j.at("inv_freq").back().get<double>();
  EXPECT_NEAR(last, std::pow(10000.0, -126.0 / 128.0) / 4.0, 2e-7 * last);
}

TEST(InspectCli, BadInputIsAClearErrorWithExitStatusOne) {
  const CliResult r = Cli("inspect --head-dim 64 --rope-type linear --factor 0.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("error: rope_parameters.factor must be a finite number >= 1"), std::string::npos) << r.out;
  const CliResult missing = Cli("inspect --rope-type linear --factor 2");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("--head-dim is required"), std::string::npos) << missing.out;
}

// inspect --model prints the model's summary, then per group of layers with one positional spec the RoPE exactly
// as --config prints its config.json's (a Hugging Face folder is both); a GGUF file's resolves to the same base
// RoPE as the folder it was converted from.
TEST(InspectCli, ModelPrintsWhatConfigPrints) {
  const std::string dir = std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-hf";
  const CliResult from_model = Cli("inspect --model " + dir + " --positions 0,1,511");
  const CliResult from_config = Cli("inspect --config " + dir + "/config.json --positions 0,1,511");
  ASSERT_EQ(from_model.status, 0) << from_model.out;
  ASSERT_EQ(from_config.status, 0) << from_config.out;
  const std::string header = "\n== layers 0, 1, 2, 3, 4 (full_attention): RoPE theta 10000, scaling none\n";
  const size_t at = from_model.out.find(header);
  ASSERT_NE(at, std::string::npos) << from_model.out;
  EXPECT_EQ(from_model.out.rfind("HF safetensors (1 file) llama: dim 64, 5 layers", 0), 0u) << from_model.out;
  EXPECT_EQ(from_model.out.substr(at + header.size()), from_config.out);
  const CliResult gguf = Cli("inspect --model " + std::string(POSENC_TEST_DATA_DIR) +
                             "/models/stories260K-F32.gguf --positions 0,1,511 --json");
  ASSERT_EQ(gguf.status, 0) << gguf.out;
  EXPECT_NE(gguf.out.find("\"interleaved\""), std::string::npos) << gguf.out;
}

// A Llama-3.1-style GGUF states per-pair divisors in rope_freqs.weight; eval applies them, so inspect --model shows
// inv_freq with them (the RoPE this file states), and names them.
TEST(InspectCli, ModelShowsTheRopeFreqsFactors) {
  testing::TempDir dir("inspect_rope_freqs");
  const GgufFile g = GgufFile::Open(std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-F32.gguf");
  GgufWriter w;
  w.CopyMetadata(g);
  for (const GgufTensorInfo& t : g.tensors()) {
    w.AddTensorBytes(std::string(t.name), t.type, t.Shape(), std::span<const uint8_t>(t.data, t.n_bytes));
  }
  const std::vector<float> factors = {1.0f, 2.0f, 4.0f, 8.0f};  // rotary_dim / 2 = 4 pairs
  const int64_t shape[1] = {4};
  w.AddTensor("rope_freqs.weight", GgmlType::kF32, shape, factors);
  const std::string path = dir / "rope_freqs.gguf";
  w.WriteFile(path);
  const CliResult r = Cli("inspect --model " + path + " --positions 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("rope_freqs (divide inv_freq)      1,2,4,8"), std::string::npos) << r.out;
  // inv_freq of pair i: 10000^(-2i/8) / factor_i.
  EXPECT_NE(r.out.find("    1      0.0500000007 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("    3    0.000125000006 "), std::string::npos) << r.out;
}

}  // namespace
}  // namespace posenc
