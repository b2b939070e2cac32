// The `posenc eval` and `posenc generate` command lines: default data files, the JSON keys, CSV, exit status
// and message on bad input, and --plot with and without gnuplot.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "posenc/report/gnuplot.h"
#include "test_util.h"

namespace posenc {
namespace {

using testing::CliResult;

// Runs the posenc binary; stderr goes to `err_file` when given (else discarded); stdout is captured.
CliResult Cli(const std::string& args, const std::string& err_file = "/dev/null", const std::string& env = "") {
  return testing::RunPosenc(args, "2>" + err_file, env);
}

std::string Temp(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("posenc_eval_cli_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(EvalCliTest, JsonHasExactlyTheListedKeys) {
  const std::string json_path = Temp("out.json"), csv_path = Temp("out.csv");
  // Defaults for model, tokenizer and text: found next to the executable (build/../data).
  const CliResult r = Cli("eval --ctx 256,512 --methods none,yarn --tokens 512 --json " + json_path + " --csv " +
                          csv_path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| ctx | method | factor | ppl | 95% CI | Δnll vs none (95%) | ppl 0-256 | ppl 256-512 | "
                       "tokens | tokens/s |"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("protocol: posenc ("), std::string::npos) << r.out;
  const nlohmann::json j = nlohmann::json::parse(Slurp(json_path));
  std::set<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"model", "text", "text_part", "tokens", "protocol", "baseline", "kl_baseline",
                                         "stream_length", "first_ids", "add_bos", "parse_special",
                                         "model_notes", "compute", "weights", "results", "complete"}));
  EXPECT_EQ(j.at("parse_special"), false);  // the default: special tokens in the text are characters
  EXPECT_EQ(j.at("complete"), true);
  EXPECT_EQ(j.at("protocol").at("name"), "posenc");
  EXPECT_EQ(j.at("protocol").at("unit"), "window");
  EXPECT_EQ(j.at("baseline"), "none");
  EXPECT_EQ(j.at("add_bos"), true);  // llama2.c's tok512: BOS at each document's start
  EXPECT_EQ(j.at("first_ids")[0], 1);
  EXPECT_EQ(j.at("tokens"), 512);
  EXPECT_EQ(j.at("stream_length"), 386353);  // tinystories_val_stories.txt, as oracle_ppl.json
  EXPECT_EQ(j.at("first_ids").size(), 40u);
  ASSERT_EQ(j.at("results").size(), 4u);
  for (const nlohmann::json& row : j.at("results")) {
    std::set<std::string> row_keys;
    for (const auto& [k, v] : row.items()) row_keys.insert(k);
    std::set<std::string> want = {"ctx",    "method", "factor", "ppl",     "mean_nll", "nll_mean", "nll_se",
                                  "n_units", "tokens", "ci95",  "buckets", "windows",  "unit_nll"};
    if (row.at("method") != "none") {
      for (const char* k : {"diff_nll_mean", "diff_nll_se", "diff_t", "diff_ci95", "diff_real"}) want.insert(k);
    }
    if (row.contains("same_as")) want.insert("same_as");  // yarn at ctx <= L0 is none, bit for bit
    EXPECT_EQ(row_keys, want);
    for (const nlohmann::json& b : row.at("buckets")) {
      std::set<std::string> bucket_keys;
      for (const auto& [k, v] : b.items()) bucket_keys.insert(k);
      EXPECT_EQ(bucket_keys, (std::set<std::string>{"from", "to", "ppl", "nll_mean", "tokens"}));
    }
  }
  EXPECT_EQ(j.at("results")[2].at("ctx"), 512);
  EXPECT_EQ(j.at("results")[2].at("method"), "none");
  EXPECT_NEAR(j.at("results")[2].at("ppl").get<double>(), std::exp(j.at("results")[2].at("mean_nll").get<double>()),
              1e-12);
  const std::string csv = Slurp(csv_path);
  EXPECT_EQ(csv.rfind("ctx,method,factor,scope,from,to,ppl,mean_nll,tokens\n", 0), 0u) << csv;
  EXPECT_NE(csv.find("\n512,yarn,1,bucket,256,512,"), std::string::npos) << csv;
  std::remove(json_path.c_str());
  std::remove(csv_path.c_str());
}

// --add-bos no drops the BOS that tok512 puts before each document: the stream is shorter by one token per
// document and starts with the text's first token; a bad value is an error naming it.
TEST(EvalCliTest, AddBosNoDropsTheDocumentBos) {
  const std::string json_path = Temp("nobos.json");
  const CliResult r = Cli("eval --ctx 256 --methods none --tokens 256 --add-bos no --json " + json_path);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(Slurp(json_path));
  EXPECT_EQ(j.at("add_bos"), false);
  EXPECT_NE(j.at("first_ids")[0], 1);
  EXPECT_LT(j.at("stream_length").get<int64_t>(), 386353);
  std::remove(json_path.c_str());
  const std::string err = Temp("nobos.err");
  const CliResult bad = Cli("eval --ctx 256 --methods none --tokens 256 --add-bos maybe", err);
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(Slurp(err).find("maybe"), std::string::npos) << Slurp(err);
  std::remove(err.c_str());
}

// A model path that is not valid UTF-8 (a Latin-1 file name) is evaluated and its report written, the path's
// invalid byte shown as U+FFFD (JSON strings are UTF-8), instead of the JSON library's type_error after the work.
TEST(EvalCliTest, NonUtf8ModelPathStillWritesTheReport) {
  const std::string link = Temp("model\xFF.bin"), json_path = Temp("latin1.json");
  std::filesystem::remove(link);
  std::filesystem::create_symlink(std::string(POSENC_DATA_DIR) + "/stories260K.bin", link);
  const CliResult r = Cli("eval --model '" + link + "' --tokenizer '" + std::string(POSENC_DATA_DIR) +
                          "/tok512.bin' --ctx 256 --methods none --tokens 256 --json " + json_path);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(Slurp(json_path));
  EXPECT_NE(j.at("model").get<std::string>().find("model\xEF\xBF\xBD.bin"), std::string::npos) << j.at("model");
  EXPECT_EQ(j.at("results").size(), 1u);
  std::filesystem::remove(link);
  std::remove(json_path.c_str());
}

TEST(EvalCliTest, UncertaintyEqualsADirectComputationFromTheWindows) {
  const std::string json_path = Temp("ci.json");
  const CliResult r = Cli("eval --ctx 256 --methods none,linear --factor 2 --tokens 512 --json " + json_path);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(Slurp(json_path));
  ASSERT_EQ(j.at("results").size(), 2u);
  // The uncertainty, computed directly from the per-window results: SE = sd (n - 1) / sqrt(n) of the windows'
  // mean NLLs, CI = mean -/+ t(0.975, n - 1) SE in ppl; the paired difference of yarn and none per window.
  // t(0.975, 1) = tan(0.475 pi) = 12.706204736174707 (n = 2 windows at ctx 256 with N = 512).
  for (size_t i : {0u, 1u}) {  // none, linear with factor 2 at ctx 256
    const nlohmann::json& row = j.at("results")[i];
    const nlohmann::json& base = j.at("results")[0];
    ASSERT_EQ(row.at("windows").size(), 2u);
    const double a = row.at("windows")[0].at("nll_mean"), b = row.at("windows")[1].at("nll_mean");
    const double mean = (a + b) / 2, se = std::fabs(a - b) / 2;  // sd of two values = |a - b| / sqrt(2)
    const double t = std::tan(0.475 * 3.14159265358979323846);
    EXPECT_NEAR(row.at("nll_mean").get<double>(), mean, 1e-12);
    EXPECT_NEAR(row.at("nll_se").get<double>(), se, 1e-12);
    EXPECT_EQ(row.at("n_units"), 2);
    EXPECT_NEAR(row.at("ci95")[0].get<double>(), std::exp(mean - t * se), 1e-9 * std::exp(mean));
    EXPECT_NEAR(row.at("ci95")[1].get<double>(), std::exp(mean + t * se), 1e-9 * std::exp(mean));
    if (i == 1) {
      const double d0 = a - base.at("windows")[0].at("nll_mean").get<double>();
      const double d1 = b - base.at("windows")[1].at("nll_mean").get<double>();
      EXPECT_NEAR(row.at("diff_nll_mean").get<double>(), (d0 + d1) / 2, 1e-12);
      EXPECT_NEAR(row.at("diff_nll_se").get<double>(), std::fabs(d0 - d1) / 2, 1e-12);
      EXPECT_NEAR(row.at("diff_ci95")[1].get<double>(), (d0 + d1) / 2 + t * std::fabs(d0 - d1) / 2, 1e-9);
    }
  }
  EXPECT_NE(r.out.find("paired Δnll against none over the same windows"), std::string::npos) << r.out;
  std::remove(json_path.c_str());
}

TEST(EvalCliTest, UnknownMethodExitsOneWithTheMessage) {
  const std::string err = Temp("err.txt");
  const CliResult r = Cli("eval --methods none,bogus --tokens 512", err);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(Slurp(err).find("error: unknown method 'bogus'"), std::string::npos) << Slurp(err);
  EXPECT_EQ(r.out, "");
  std::remove(err.c_str());
}

TEST(EvalCliTest, NNotAMultipleOfCtxExitsOne) {
  const std::string err = Temp("err2.txt");
  const CliResult r = Cli("eval --ctx 256,384 --tokens 512", err);
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(Slurp(err).find("error: tokens (N) = 512 must be a multiple of every ctx"), std::string::npos)
      << Slurp(err);
  std::remove(err.c_str());
}

TEST(EvalCliTest, PlotWithoutGnuplotIsAMessageNotAFailure) {
  const std::string err = Temp("err3.txt"), png = Temp("none.png");
  const CliResult r = Cli("eval --ctx 256 --methods none --tokens 256 --plot " + png, err, "env PATH=/nonexistent");
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("| 256 | none |"), std::string::npos);
  EXPECT_NE(Slurp(err).find("gnuplot was not found on PATH"), std::string::npos) << Slurp(err);
  EXPECT_FALSE(std::filesystem::exists(png));
  std::remove(err.c_str());
}

TEST(EvalCliTest, PlotWithGnuplotWritesAPng) {
  if (!GnuplotPath()) GTEST_SKIP() << GnuplotMissingMessage();
  const std::string png = Temp("plot.png");
  const CliResult r = Cli("eval --ctx 256,512 --methods none,linear --tokens 512 --plot " + png);
  ASSERT_EQ(r.status, 0);
  const std::string bytes = Slurp(png);
  ASSERT_GT(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  std::remove(png.c_str());
}

TEST(EvalCliTest, Llama3FromAnHfConfigAndLongropeFromFlags) {
  const std::string config = Temp("llama3.json"), json_path = Temp("l3.json");
  std::ofstream(config) << R"({"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": 2048,
    "rope_scaling": {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 512}})";
  const CliResult r = Cli("eval --ctx 256,1024 --methods none,llama3,longrope --tokens 1024 --config " + config +
                          " --short-factor 1,1,1,1 --long-factor 1,1.5,2,4 --json " + json_path);
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(Slurp(json_path));
  ASSERT_EQ(j.at("results").size(), 6u);
  EXPECT_EQ(j.at("results")[1].at("method"), "llama3");
  EXPECT_EQ(j.at("results")[1].at("factor"), 4.0);  // the config's factor, not max(1, 256 / 512)
  EXPECT_EQ(j.at("results")[5].at("method"), "longrope");
  EXPECT_EQ(j.at("results")[5].at("factor"), 2.0);  // no factor given: s = 1024 / 512
  for (const nlohmann::json& row : j.at("results")) EXPECT_GT(row.at("ppl").get<double>(), 1.0);
  // A config whose rope_type is neither llama3 nor longrope is refused with the reason.
  std::ofstream(config) << R"({"head_dim": 8, "rope_scaling": {"rope_type": "linear", "factor": 2.0}})";
  const std::string err = Temp("err4.txt");
  EXPECT_EQ(Cli("eval --ctx 256 --methods llama3 --tokens 256 --config " + config, err).status, 1);
  EXPECT_NE(Slurp(err).find("rope_type must be llama3 or longrope"), std::string::npos) << Slurp(err);
  std::remove(config.c_str());
  std::remove(json_path.c_str());
  std::remove(err.c_str());
}

TEST(GenerateCliTest, GreedyStartsLikeTheDocumentedSample) {
  const CliResult r = Cli("generate -t 0 -n 20");
  ASSERT_EQ(r.status, 0);
  EXPECT_EQ(r.out.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.out;
}

}  // namespace
}  // namespace posenc

namespace posenc {
namespace {

// yarn's parameters as flags: recorded in the JSON by their HF names, and a resume of that file without them
// is refused (its rows were computed with other frequencies).
TEST(EvalCliTest, YarnFlagsAreRecordedAndResumeChecksThem) {
  const std::string json = Temp("yarn_flags.json");
  const std::string run = "eval --ctx 1024 --methods yarn --tokens 2048 --baseline - ";
  ASSERT_EQ(Cli(run + "--beta-fast 2 --attention-factor 1.25 --no-truncate --json " + json).status, 0);
  const nlohmann::json j = nlohmann::json::parse(testing::FileBytes(json));
  EXPECT_EQ(j.at("yarn_parameters"),
            nlohmann::json({{"beta_fast", 2.0}, {"attention_factor", 1.25}, {"truncate", false}}));
  const CliResult again = testing::RunPosenc(run + "--resume " + json, "2>&1");
  EXPECT_EQ(again.status, 1);
  EXPECT_NE(again.out.find("yarn_parameters"), std::string::npos) << again.out;
  std::filesystem::remove(json);
}

// A method's parameter without that method in the run would be ignored: refused, naming who reads it.
TEST(EvalCliTest, ParametersOfMethodsNotRunAreRefused) {
  const CliResult dca = testing::RunPosenc("eval --ctx 512 --tokens 512 --methods none,yarn --chunk-size 0", "2>&1");
  EXPECT_EQ(dca.status, 1);
  EXPECT_NE(dca.out.find("--chunk-size is a parameter of dca, which the run does not use"), std::string::npos)
      << dca.out;
  const CliResult yarn = testing::RunPosenc("passkey --lengths 256 --methods none --beta-fast 4", "2>&1");
  EXPECT_EQ(yarn.status, 1);
  EXPECT_NE(yarn.out.find("--beta-fast is a parameter of yarn"), std::string::npos) << yarn.out;
  const CliResult factor = testing::RunPosenc("eval --ctx 512 --tokens 512 --methods none,dca --factor 2", "2>&1");
  EXPECT_EQ(factor.status, 1);
  EXPECT_NE(factor.out.find("--factor is a parameter of the scaling methods"), std::string::npos) << factor.out;
  // Read by the KL base: accepted.
  EXPECT_EQ(Cli("eval --ctx 512 --tokens 512 --methods none --kl-baseline yarn --beta-fast 4").status, 0);
}

// The compute path asked for, the weights' storage and the paths the matrices took are recorded; a resume with
// another request, or of rows whose matrices took other paths (`auto` on another CPU), is refused.
TEST(EvalCliTest, ResumeChecksTheComputePath) {
  const std::string json = Temp("compute_path.json");
  const std::string run = "eval --ctx 512 --tokens 512 --methods none --baseline - ";
  ASSERT_EQ(Cli(run + "--json " + json).status, 0);
  nlohmann::json j = nlohmann::json::parse(testing::FileBytes(json));
  EXPECT_EQ(j.at("compute").at("requested"), "f32");
  EXPECT_EQ(j.at("compute").at("paths"), "f32");
  EXPECT_EQ(j.at("weights"), "auto");
  const CliResult other = testing::RunPosenc(run + "--compute auto --resume " + json, "2>&1");
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.out.find("its compute is \"f32\", this run's is \"auto\""), std::string::npos) << other.out;
  j["compute"]["paths"] = "bf16";
  std::ofstream(json) << j.dump();
  const CliResult paths = testing::RunPosenc(run + "--resume " + json, "2>&1");
  EXPECT_EQ(paths.status, 1);
  EXPECT_NE(paths.out.find("computed on the compute path bf16, this run's is f32"), std::string::npos) << paths.out;
  std::filesystem::remove(json);
}

// A resume with other position-map or llama3 parameters is another run's file: refused naming what differs.
TEST(EvalCliTest, ResumeChecksPositionMapAndLlama3Parameters) {
  const std::string json = Temp("map_params.json");
  const std::string run = "eval --ctx 1024 --tokens 2048 --baseline - ";
  ASSERT_EQ(Cli(run + "--methods rerope --window 100 --json " + json).status, 0);
  const CliResult same = testing::RunPosenc(run + "--methods rerope --window 100 --resume " + json, "2>&1");
  EXPECT_EQ(same.status, 0) << same.out;
  // A refused resume leaves its file as it was, even one cut short (an interrupted run's rows come first).
  const std::string before = testing::FileBytes(json);
  const CliResult other = testing::RunPosenc(run + "--methods none,rerope --window 50 --resume " + json, "2>&1");
  EXPECT_EQ(other.status, 1);
  EXPECT_NE(other.out.find("parameters 'window 100', this run's are 'window 50'"), std::string::npos) << other.out;
  EXPECT_EQ(testing::FileBytes(json), before);
  const std::string llama = "--methods llama3 --low-freq-factor 1 --high-freq-factor ";
  ASSERT_EQ(Cli(run + llama + "4 --json " + json).status, 0);
  const nlohmann::json j = nlohmann::json::parse(testing::FileBytes(json));
  EXPECT_EQ(j.at("llama3_parameters"), nlohmann::json({{"low_freq_factor", 1.0}, {"high_freq_factor", 4.0}}));
  const CliResult llama_other = testing::RunPosenc(run + llama + "8 --resume " + json, "2>&1");
  EXPECT_EQ(llama_other.status, 1);
  EXPECT_NE(llama_other.out.find("llama3_parameters"), std::string::npos) << llama_other.out;
  std::filesystem::remove(json);
}

}  // namespace
}  // namespace posenc
