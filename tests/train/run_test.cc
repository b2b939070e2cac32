// Training runs end to end on small inputs: fine-tuning the bundled stories260K for a few steps at a short
// context, checkpoints that the model reader loads back bit for bit, interruption and resumption giving the
// same weights as an uninterrupted run, a new model with a learned table, and the bad inputs refused before
// the first step.
#include "posenc/train/run.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/model/loader.h"
#include "posenc/train/checkpoint.h"
#include "posenc/train/train_model.h"
#include "tiny_model.h"

namespace posenc {
namespace {

namespace fs = std::filesystem;

const std::string kData = POSENC_DATA_DIR;

class TrainRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("posenc_train_run_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Fine-tuning stories260K at ctx 32 on the 6-document sample (4 train, 2 held out), batch 2.
  TrainRunOptions Finetune(const std::string& out, int64_t steps) const {
    TrainRunOptions o;
    o.model_path = kData + "/stories260K.bin";
    o.tokenizer_path = kData + "/tok512.bin";
    o.text_path = kData + "/text/tinystories_sample_cs336.txt";
    o.method = "linear";
    o.factor = 2.0;
    o.ctx = 32;
    o.steps = steps;
    o.batch = 2;
    o.lr = 1e-3;
    o.warmup = 1;
    o.eval_ctx = {32, 64};
    o.eval_tokens = 128;
    o.out_path = (dir_ / out).string();
    return o;
  }

  fs::path dir_;
};

std::vector<float> Parameters(const std::string& path, int64_t max_seq_len) {
  const ModelFile mf = LoadModelFile(path);
  TrainModel<float> m(TrainConfigFromModelFile(mf, max_seq_len));
  LoadParameters(mf, m);
  return {m.parameters().begin(), m.parameters().end()};
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST_F(TrainRunTest, FinetuneWritesCheckpointsTheReaderLoadsAndRecordsTheMethod) {
  TrainRunOptions o = Finetune("ft.bin", 3);
  o.eval_at = {0, 2, 3};
  int64_t calls = 0;
  const TrainRunReport r = RunTraining(o, [&](const TrainProgress& p) {
    ++calls;
    EXPECT_EQ(p.steps, 3);
    EXPECT_TRUE(std::isfinite(p.loss));
    EXPECT_GT(p.tokens_per_s, 0);
  }, nullptr);
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(r.losses.size(), 3u);
  EXPECT_EQ(r.split_rule, "documents 1-4 of 6 train (the first 80%), 5-6 are held out");
  ASSERT_EQ(r.held_out.size(), 6u);  // steps 0, 2, 3 x lengths 32, 64
  for (const HeldOutPoint& p : r.held_out) {
    EXPECT_TRUE(p.error.empty());
    EXPECT_TRUE(std::isfinite(p.ppl) && p.ppl > 1.0) << p.step << " " << p.ctx;
  }
  ASSERT_EQ(r.checkpoints.size(), 2u);
  EXPECT_EQ(r.checkpoints[0], (dir_ / "ft.step2.bin").string());
  EXPECT_EQ(r.checkpoints[1], (dir_ / "ft.bin").string());

  // The .bin holds exactly the weights of the state file (the state is written from the same buffer).
  const ModelFile mf = LoadModelFile(r.checkpoints[1]);
  EXPECT_EQ(mf.config.train_ctx, 512);  // L0 stays the base model's: an evaluation scales from it
  const TrainShape shape = TrainConfigFromModelFile(mf, 64);
  TrainModel<float> from_state(shape);
  const TrainState st = ReadTrainState(r.state_path, from_state, TrainModelKey(shape));
  EXPECT_EQ(st.info.step, 3);
  const std::vector<float> w = Parameters(r.checkpoints[1], 64);
  ASSERT_EQ(w.size(), from_state.parameters().size());
  for (size_t i = 0; i < w.size(); ++i) ASSERT_EQ(w[i], from_state.parameters()[i]) << i;
  // ... and differs from the base model (training moved it).
  const std::vector<float> base = Parameters(o.model_path, 64);
  EXPECT_NE(base, w);

  const nlohmann::json j = nlohmann::json::parse(Bytes(r.json_path));
  EXPECT_EQ(j["rope"]["method"], "linear");
  EXPECT_EQ(j["rope"]["factor"], 2.0);
  EXPECT_EQ(j["rope"]["original_max_position_embeddings"], 512);
  EXPECT_EQ(j["split"]["rule"], r.split_rule);
}

TEST_F(TrainRunTest, GgufCheckpointCarriesTheMethodInRopeScalingKeys) {
  TrainRunOptions o = Finetune("ft.gguf", 1);
  o.method = "yarn";
  const TrainRunReport r = RunTraining(o, {}, nullptr);
  const ModelFile mf = LoadModelFile(r.checkpoints.back());
  EXPECT_EQ(mf.config.layers[0].rope_params.rope_type, RopeType::kYarn);
  ASSERT_TRUE(mf.config.layers[0].rope_params.factor.has_value());
  EXPECT_EQ(*mf.config.layers[0].rope_params.factor, 2.0);
  EXPECT_EQ(mf.config.train_ctx, 512);
  const TrainShape shape = TrainConfigFromModelFile(LoadModelFile(o.model_path), 64);
  TrainModel<float> from_state(shape);
  ReadTrainState(r.state_path, from_state, TrainModelKey(shape));
  TrainModel<float> m(TrainConfigFromModelFile(LoadModelFile(o.model_path), 64));
  LoadParameters(mf, m);
  for (size_t i = 0; i < m.parameters().size(); ++i) ASSERT_EQ(m.parameters()[i], from_state.parameters()[i]) << i;
}

TEST_F(TrainRunTest, InterruptedThenResumedEqualsOneRun) {
  const TrainRunReport straight = RunTraining(Finetune("a.bin", 3), {}, nullptr);
  std::atomic<bool> stop{true};  // as if Ctrl-C arrived during the first step
  const TrainRunReport cut = RunTraining(Finetune("b.bin", 3), {}, &stop);
  EXPECT_TRUE(cut.interrupted);
  EXPECT_EQ(cut.steps_done, 1);
  TrainRunOptions resume = Finetune("b.bin", 3);
  resume.resume_path = cut.state_path;
  const TrainRunReport rest = RunTraining(resume, {}, nullptr);
  EXPECT_EQ(rest.first_step, 1);
  EXPECT_EQ(rest.losses.size(), 2u);
  EXPECT_EQ(rest.losses, std::vector<double>(straight.losses.begin() + 1, straight.losses.end()));
  EXPECT_EQ(Bytes(straight.checkpoints.back()), Bytes(rest.checkpoints.back()));
}

TEST_F(TrainRunTest, NewModelWithLearnedTableReportsLengthsPastItAsErrors) {
  TrainRunOptions o;
  o.config = testing::TinyTrainConfig(PositionEncoding::kLearned);
  o.config->vocab_size = 512;
  o.config->max_seq_len = 16;
  o.tokenizer_path = kData + "/tok512.bin";
  o.text_path = kData + "/text/tinystories_sample_cs336.txt";
  o.ctx = 16;
  o.steps = 2;
  o.batch = 2;
  o.eval_ctx = {16, 32};
  o.out_path = (dir_ / "new.gguf").string();
  const TrainRunReport r = RunTraining(o, {}, nullptr);
  ASSERT_EQ(r.held_out.size(), 2u);
  EXPECT_TRUE(r.held_out[0].error.empty());
  EXPECT_TRUE(std::isfinite(r.held_out[0].ppl));
  EXPECT_NE(r.held_out[1].error.find("learned table has 16 rows"), std::string::npos) << r.held_out[1].error;
  EXPECT_TRUE(std::isnan(r.held_out[1].ppl));
  // A llama2.c checkpoint cannot hold a learned table: refused before training.
  o.out_path = (dir_ / "new.bin").string();
  EXPECT_THROW(RunTraining(o, {}, nullptr), ConfigError);
}

// The Hugging Face copy of stories260K stores q and k rows in half-split pair order; loaded for training they are
// put back into interleaved pairs, so its parameters equal the llama2.c checkpoint's bit for bit (both float32).
TEST_F(TrainRunTest, HalfSplitFolderLoadsAsTheInterleavedWeights) {
  const std::string hf = std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-hf";
  ASSERT_EQ(LoadModelFile(hf).config.rope_layout, RopeLayout::kHalfSplit);
  const std::vector<float> from_bin = Parameters(kData + "/stories260K.bin", 64);
  const std::vector<float> from_hf = Parameters(hf, 64);
  ASSERT_EQ(from_bin.size(), from_hf.size());
  EXPECT_EQ(std::memcmp(from_bin.data(), from_hf.data(), from_bin.size() * sizeof(float)), 0);
  // And a run fine-tunes it: the first held-out point equals the llama2.c file's (the same function).
  TrainRunOptions o = Finetune("from_hf.gguf", 1);
  o.model_path = hf;
  o.eval_at = {0};
  const TrainRunReport r_hf = RunTraining(o, {}, nullptr);
  o = Finetune("from_bin.gguf", 1);
  o.eval_at = {0};
  const TrainRunReport r_bin = RunTraining(o, {}, nullptr);
  ASSERT_FALSE(r_hf.held_out.empty());
  ASSERT_EQ(r_hf.held_out.size(), r_bin.held_out.size());
  for (size_t i = 0; i < r_hf.held_out.size(); ++i) EXPECT_EQ(r_hf.held_out[i].ppl, r_bin.held_out[i].ppl) << i;
}

// A model's own rope_theta carries through: the method tables use it and the GGUF checkpoint records it; a
// llama2.c checkpoint, which has no field for it, is refused.
TEST_F(TrainRunTest, TheModelsRopeThetaIsKept) {
  const fs::path hf = dir_ / "theta-hf";
  fs::copy(std::string(POSENC_TEST_DATA_DIR) + "/models/stories260K-hf", hf);
  nlohmann::json config = nlohmann::json::parse(Bytes((hf / "config.json").string()));
  config["rope_theta"] = 20000.0;
  fs::remove(hf / "config.json");
  std::ofstream((hf / "config.json").string()) << config.dump();
  const ModelFile mf = LoadModelFile(hf.string());
  const TrainShape t = TrainConfigFromModelFile(mf, 64);
  EXPECT_EQ(t.rope_theta, 20000.0);
  EXPECT_EQ(ToModelConfig(t, 512).layers[0].rope_params.rope_theta, 20000.0);
  TrainRunOptions o = Finetune("theta.gguf", 1);
  o.model_path = hf.string();
  o.method = "none";
  o.factor.reset();
  RunTraining(o, {}, nullptr);
  EXPECT_EQ(LoadModelFile(o.out_path).config.layers[0].rope_params.rope_theta, 20000.0);
  o.out_path = (dir_ / "theta.bin").string();
  try {
    RunTraining(o, {}, nullptr);
    ADD_FAILURE() << "a llama2.c checkpoint of a rope_theta 20000 model was written";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("rope_theta 20000"), std::string::npos) << e.what();
  }
}

TEST_F(TrainRunTest, BadInputIsRefusedBeforeTheFirstStep) {
  auto message = [&](TrainRunOptions o) -> std::string {
    try {
      RunTraining(o, {}, nullptr);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  TrainRunOptions o = Finetune("x.bin", 0);
  EXPECT_EQ(message(o), "`steps` must be >= 1, got 0");
  o = Finetune("x.bin", 1);
  o.batch = 100;
  EXPECT_NE(message(o).find("`batch` 100 windows of `ctx` 32 need 3300 distinct training tokens"), std::string::npos)
      << message(o);
  o = Finetune("x.bin", 1);
  o.ctx = 100000;
  EXPECT_NE(message(o).find("`ctx` 100000 needs at least 100001 training tokens"), std::string::npos) << message(o);
  o = Finetune("x.bin", 1);
  o.out_path = (dir_ / "missing" / "x.bin").string();
  EXPECT_NE(message(o).find("`out_path`"), std::string::npos) << message(o);
  EXPECT_NE(message(o).find("does not exist"), std::string::npos) << message(o);
  o = Finetune("x.bin", 1);
  fs::copy_file(o.model_path, dir_ / "model.bin");
  o.model_path = o.out_path = (dir_ / "model.bin").string();
  EXPECT_NE(message(o).find("`out_path` " + o.out_path + " is the same file as `model_path`"), std::string::npos) << message(o);
  o = Finetune("x.bin", 1);
  o.eval_ctx = {100000};
  EXPECT_NE(message(o).find("held-out perplexity at 100000 tokens needs 100001 held-out tokens"), std::string::npos)
      << message(o);
  // A state from another model.
  TrainRunOptions other;
  other.config = testing::TinyTrainConfig();
  other.config->vocab_size = 512;
  other.tokenizer_path = kData + "/tok512.bin";
  other.text_path = o.text_path;
  other.ctx = 12;
  other.steps = 1;
  other.batch = 1;
  other.out_path = (dir_ / "tiny.gguf").string();
  const TrainRunReport tiny = RunTraining(other, {}, nullptr);
  o = Finetune("x.bin", 2);
  o.resume_path = tiny.state_path;
  EXPECT_NE(message(o).find("was written for another model"), std::string::npos) << message(o);
  EXPECT_FALSE(fs::exists(dir_ / "x.bin"));  // nothing written by a refused run
}

std::string RunError(const TrainRunOptions& o) {
  try {
    RunTraining(o, {}, nullptr);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A resumed run with another method, factor, window, batch, learning rate, weight decay, clip, seed or
// special-token matching would silently train something else: refused, naming the option and both values.
// More --steps is allowed.
TEST_F(TrainRunTest, ResumeWithOtherSettingsIsRefused) {
  const TrainRunReport first = RunTraining(Finetune("a.bin", 1), {}, nullptr);
  struct Case {
    std::function<void(TrainRunOptions&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](TrainRunOptions& o) { o.method = "yarn"; }, "trained with `method` linear; this run asks for `method` yarn"},
      {[](TrainRunOptions& o) { o.factor = 3.0; }, "trained with `factor` 2; this run asks for `factor` 3"},
      {[](TrainRunOptions& o) { o.ctx = 16; }, "trained with `ctx` 32; this run asks for `ctx` 16"},
      {[](TrainRunOptions& o) { o.batch = 1; }, "trained with `batch` 2; this run asks for `batch` 1"},
      {[](TrainRunOptions& o) { o.lr = 2e-3; }, "trained with `lr` 0.001; this run asks for `lr` 0.002"},
      {[](TrainRunOptions& o) { o.weight_decay = 0.1; }, "trained with `weight_decay` 0.01; this run asks for"},
      {[](TrainRunOptions& o) { o.grad_clip = 0; }, "trained with `grad_clip` 1; this run asks for `grad_clip` 0"},
      {[](TrainRunOptions& o) { o.seed = 7; }, "trained with `seed` 1; this run asks for `seed` 7"},
      {[](TrainRunOptions& o) { o.parse_special = true; },
       "trained with `parse_special` off; this run asks for `parse_special` on"},
      // Another split: all of the text trains and another file is held out.
      {[](TrainRunOptions& o) { o.held_out_path = kData + "/text/tinystories_val_stories.txt"; },
       "trained with the texts (`text_path`, `held_out_path`): text 0x"},
  };
  for (const Case& c : cases) {
    TrainRunOptions o = Finetune("b.bin", 2);
    o.resume_path = first.state_path;
    c.change(o);
    const std::string m = RunError(o);
    EXPECT_NE(m.find("`resume_path` " + first.state_path + " was " + c.message), std::string::npos) << m;
    EXPECT_NE(m.find("only `steps` may grow"), std::string::npos) << m;
    EXPECT_FALSE(fs::exists(dir_ / "b.bin"));
  }
  TrainRunOptions more = Finetune("b.bin", 3);
  more.resume_path = first.state_path;
  EXPECT_EQ(RunTraining(more, {}, nullptr).first_step, 1);
}

// --parse-special reaches the training tokenizer: "</s>" written inside the documents is the one id 2 of the
// Llama SentencePiece vocabulary with it, and several plain pieces without; the report records the choice.
TEST_F(TrainRunTest, ParseSpecialReachesTheTrainingText) {
  const std::string text_path = (dir_ / "specials.txt").string();
  {
    std::ofstream text(text_path);
    for (int i = 0; i < 40; ++i) text << "Once upon a time</s> there was a cat.\n<|endoftext|>\n";
  }
  auto run = [&](bool parse_special, const std::string& out) {
    TrainRunOptions o;
    o.config = testing::TinyTrainConfig();
    o.config->vocab_size = 32000;
    o.tokenizer_path = std::string(POSENC_TEST_DATA_DIR) + "/tokenizer/ggml-vocab-llama-spm.gguf";
    o.text_path = text_path;
    o.parse_special = parse_special;
    o.ctx = 8;
    o.steps = 1;
    o.batch = 1;
    o.eval_tokens = 8;
    o.out_path = (dir_ / out).string();
    return RunTraining(o, {}, nullptr);
  };
  const TrainRunReport plain = run(false, "plain.gguf");
  const TrainRunReport special = run(true, "special.gguf");
  EXPECT_FALSE(plain.parse_special);
  EXPECT_TRUE(special.parse_special);
  // 32 training documents, each holding one "</s>": matched, it is one token instead of several plain pieces.
  EXPECT_LT(special.train_tokens, plain.train_tokens);
  EXPECT_EQ(nlohmann::json::parse(TrainRunReportJson(special)).at("parse_special"), true);
}

// Every bit of a state is covered by its checksum: a flipped bit in the weights, the moments or a key is an
// error naming the file, never a run that goes on from other numbers.
TEST_F(TrainRunTest, DamagedStateIsRefused) {
  const TrainRunReport first = RunTraining(Finetune("a.bin", 1), {}, nullptr);
  const std::string good = Bytes(first.state_path);
  TrainRunOptions o = Finetune("b.bin", 2);
  o.resume_path = (dir_ / "flipped.state").string();
  for (const size_t at : {good.size() / 2, good.size() - 64, good.size() / 3 * 2}) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    std::ofstream(o.resume_path, std::ios::binary) << bad;
    const std::string m = RunError(o);
    EXPECT_NE(m.find("`resume_path` " + o.resume_path + " is damaged: its checksum is"), std::string::npos) << at << m;
  }
}

// An empty --holdout file is not "no held-out text" (the 80/20 split reported as held-out), and a negative
// --warmup is not the default.
TEST_F(TrainRunTest, EmptyHoldoutAndNegativeWarmupAreErrors) {
  TrainRunOptions o = Finetune("a.bin", 1);
  o.held_out_path = (dir_ / "empty.txt").string();
  std::ofstream(o.held_out_path) << "\n  \n";
  EXPECT_NE(RunError(o).find("`held_out_path` " + o.held_out_path + " holds no text (4 bytes)"), std::string::npos)
      << RunError(o);
  o = Finetune("a.bin", 1);
  o.warmup = -5;
  EXPECT_EQ(RunError(o), "`warmup` must be >= 0, got -5");
  EXPECT_FALSE(fs::exists(dir_ / "a.bin"));
}

}  // namespace
}  // namespace posenc
