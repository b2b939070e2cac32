// Evaluating a posenc fine-tune checkpoint through its training report (<checkpoint>.json): the recorded method
// and factor are the llama2.c checkpoint's native RoPE, its L0 is L0, and the held-out documents are the text
// (the same tokens the run held out); the report is found only for its own checkpoint; the held-out cut keeps
// documents exactly; the command line's defaults, its --no-training-report and its refusal to overwrite the report.
#include "posenc/eval/training_record.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/evaluate.h"
#include "posenc/train/run.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::ExpectThrowWith;

const std::string kData = POSENC_DATA_DIR;
const std::string kSample = kData + "/text/tinystories_sample_cs336.txt";  // 6 documents: 4 train, 2 held out

// stories260K (L0 512) fine-tuned one step with linear s = 2 at ctx 32 on the sample text, as a llama2.c file.
TrainRunReport Finetune(const std::string& out) {
  TrainRunOptions o;
  o.model_path = kData + "/stories260K.bin";
  o.tokenizer_path = kData + "/tok512.bin";
  o.text_path = kSample;
  o.method = "linear";
  o.factor = 2.0;
  o.ctx = 32;
  o.steps = 1;
  o.batch = 2;
  o.lr = 1e-3;
  o.warmup = 0;
  o.eval_tokens = 64;
  o.out_path = out;
  return RunTraining(o, {}, nullptr);
}

EvalOptions Eval(const std::string& model, std::vector<EvalMethod> methods) {
  EvalOptions o;
  o.model_path = model;
  o.tokenizer_path = kData + "/tok512.bin";
  o.text_path = kSample;
  o.ctx = {32};
  o.n_pred = 128;
  o.methods = std::move(methods);
  return o;
}

TEST(TrainingRecord, NativeIsTheRecordedMethodOnTheHeldOutDocuments) {
  testing::TempDir dir("training_record");
  const std::string ft = dir / "ft.bin";
  const TrainRunReport run = Finetune(ft);
  const std::optional<TrainingRecord> rec = FindTrainingRecord(ft);
  ASSERT_TRUE(rec.has_value());
  EXPECT_EQ(rec->report_path, ft + ".json");
  EXPECT_EQ(rec->method, "linear");
  EXPECT_EQ(rec->factor, 2.0);
  EXPECT_EQ(rec->original_ctx, 512);
  EXPECT_EQ(rec->ctx, 32);
  ASSERT_TRUE(rec->has_split);
  EXPECT_EQ(rec->text_path, std::filesystem::absolute(kSample).lexically_normal().string());
  EXPECT_EQ(rec->n_documents, 6);
  EXPECT_EQ(rec->n_train_documents, 4);

  EvalOptions o = Eval(ft, {EvalMethod::kNone, EvalMethod::kNative, EvalMethod::kLinear});
  o.method_options.factor = 2.0;  // linear at ctx 32 would otherwise scale by max(1, 32 / 512) = 1
  o.training_record = rec;
  o.text_path = rec->text_path;
  o.held_out_documents = true;
  const EvalReport r = RunEval(o);
  // The held-out documents, tokenized as the run tokenized them: the same number of tokens.
  EXPECT_EQ(r.stream_length, run.held_out_tokens);
  EXPECT_EQ(r.n_documents, 2);
  EXPECT_EQ(r.text_part, "documents 5-6 of 6 (held out by the training run, " + ft + ".json)");
  EXPECT_EQ(r.config.train_ctx, 512);
  ASSERT_EQ(r.rows.size(), 3u);
  // native = linear s = 2 from L0 512, bit for bit the linear row; none differs.
  EXPECT_EQ(r.rows[1].factor, 2.0);
  EXPECT_EQ(r.rows[1].result.ppl, r.rows[2].result.ppl);
  EXPECT_NE(r.rows[1].result.ppl, r.rows[0].result.ppl);
  bool noted = false;
  for (const std::string& n : r.model_warnings) noted = noted || n.find("trained with linear s = 2") != n.npos;
  EXPECT_TRUE(noted);

  // Without the record the llama2.c file's own RoPE is plain: native is none.
  const EvalReport plain = RunEval(Eval(ft, {EvalMethod::kNone, EvalMethod::kNative}));
  EXPECT_EQ(plain.rows[1].factor, 1.0);
  EXPECT_EQ(plain.rows[1].result.ppl, plain.rows[0].result.ppl);
  EXPECT_TRUE(plain.text_part.empty());

  // The training text itself with the record: scored whole, with a note that most of it was trained on.
  EvalOptions whole = Eval(ft, {EvalMethod::kNative});
  whole.training_record = rec;
  whole.text_path = rec->text_path;
  noted = false;
  for (const std::string& n : RunEval(whole).model_warnings) {
    noted = noted || n.find("the text is the one the checkpoint was trained on") != n.npos;
  }
  EXPECT_TRUE(noted);

  // Held-out documents of another text are refused.
  EvalOptions other = Eval(ft, {EvalMethod::kNative});
  other.training_record = rec;
  other.text_path = kData + "/text/tinystories_val_stories.txt";
  other.held_out_documents = true;
  ExpectThrowWith<ConfigError>([&] { RunEval(other); }, {"held-out documents need the training record", "trained on"});
}

TEST(TrainingRecord, FoundOnlyForItsOwnCheckpoint) {
  testing::TempDir dir("training_record_find");
  const std::string ft = dir / "ft.bin";
  Finetune(ft);
  // No report beside a file: none.
  EXPECT_FALSE(FindTrainingRecord(kData + "/stories260K.bin").has_value());
  // A copy of the checkpoint under another name does not take the report of ft.bin.
  std::filesystem::copy_file(ft, dir / "other.bin");
  std::filesystem::copy_file(ft + ".json", dir / "other.bin.json");
  EXPECT_FALSE(FindTrainingRecord(dir / "other.bin").has_value());
  // JSON of something else, or no JSON at all: not a training report.
  std::ofstream(dir / "x.bin.json") << R"({"rows": []})";
  std::filesystem::copy_file(ft, dir / "x.bin");
  EXPECT_FALSE(FindTrainingRecord(dir / "x.bin").has_value());
  std::ofstream(dir / "y.bin.json") << "not json";
  EXPECT_FALSE(FindTrainingRecord(dir / "y.bin").has_value());
  // A training report of this checkpoint with a bad key is an error naming it.
  json j = json::parse(testing::FileBytes(ft + ".json"));
  j["rope"]["factor"] = 0.5;
  std::filesystem::remove(ft + ".json");
  std::ofstream(ft + ".json") << j.dump();
  ExpectThrowWith<ConfigError>([&] { FindTrainingRecord(ft); }, {"ft.bin.json", "rope.factor", "0.5"});
  j["rope"]["factor"] = "two";
  std::filesystem::remove(ft + ".json");
  std::ofstream(ft + ".json") << j.dump();
  ExpectThrowWith<ConfigError>([&] { FindTrainingRecord(ft); }, {"ft.bin.json", "missing or of the wrong type"});
  // An older report without the texts: found, without a split; its held-out part cannot be cut.
  j["rope"]["factor"] = 2.0;
  j.erase("text");
  j.erase("held_out_text");
  std::filesystem::remove(ft + ".json");
  std::ofstream(ft + ".json") << j.dump();
  const std::optional<TrainingRecord> old = FindTrainingRecord(ft);
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->has_split);
  ExpectThrowWith<ConfigError>([&] { HeldOutDocuments(*old, "a"); }, {"does not state its texts and split"});
}

// The cut splits into exactly the held-out documents, including one that begins with a newline and a single
// held-out document; a text whose documents changed is refused.
TEST(TrainingRecord, HeldOutDocumentsAreCutExactly) {
  TrainingRecord r;
  r.report_path = "ft.bin.json";
  r.text_path = "t.txt";
  r.has_split = true;
  const std::string sep = "\n<|endoftext|>\n";
  const std::vector<std::string> cases = {
      "one" + sep + "two" + sep + "three" + sep + "four\n",
      "one" + sep + "two" + sep + "\n\nthree\n" + sep + "four",
      "one" + sep + "two" + sep + "\nthree",
  };
  for (const std::string& text : cases) {
    SCOPED_TRACE(text);
    const std::vector<std::string_view> docs = SplitDocuments(text);
    r.n_documents = static_cast<int64_t>(docs.size());
    for (int64_t k = 1; k < r.n_documents; ++k) {
      r.n_train_documents = k;
      const std::string held = HeldOutDocuments(r, text);
      const std::vector<std::string_view> got = SplitDocuments(held);
      ASSERT_EQ(got.size(), docs.size() - static_cast<size_t>(k));
      for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], docs[i + static_cast<size_t>(k)]) << i;
    }
  }
  r.n_documents = 5;
  r.n_train_documents = 4;
  ExpectThrowWith<ConfigError>([&] { HeldOutDocuments(r, cases[0]); },
                               {"t.txt has 4 documents", "ft.bin.json says 5", "changed"});
  r.n_documents = 4;
  r.n_train_documents = 4;
  ExpectThrowWith<ConfigError>([&] { HeldOutDocuments(r, cases[0]); }, {"none is held out"});
}

TEST(TrainingRecord, CommandLine) {
  testing::TempDir dir("training_record_cli");
  const std::string ft = dir / "ft.bin";
  Finetune(ft);
  const std::string out = dir / "e.json";
  const std::string run = "eval --model " + ft + " --ctx 32 --methods native --tokens 64 --baseline - ";
  const testing::CliResult r = testing::RunPosenc(run + "--json " + out, "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("documents 5-6 of 6 (held out by the training run"), std::string::npos) << r.out;
  const json j = json::parse(testing::FileBytes(out));
  EXPECT_EQ(j.at("text_part"), "documents 5-6 of 6 (held out by the training run, " + ft + ".json)");
  EXPECT_EQ(j.at("results")[0].at("factor"), 2.0);
  // --no-training-report: the file alone (L0 512 from its header, native plain, the bundled text).
  const testing::CliResult plain =
      testing::RunPosenc(run + "--no-training-report --json " + (dir / "p.json"), "2>&1");
  ASSERT_EQ(plain.status, 0) << plain.out;
  const json p = json::parse(testing::FileBytes(dir / "p.json"));
  EXPECT_EQ(p.at("results")[0].at("factor"), 1.0);
  EXPECT_TRUE(p.at("text_part").is_null());
  // The report is an input: no output may replace it.
  const std::string report_before = testing::FileBytes(ft + ".json");
  const testing::CliResult clash = testing::RunPosenc(run + "--json " + ft + ".json", "2>&1");
  EXPECT_EQ(clash.status, 1);
  EXPECT_NE(clash.out.find("training report"), std::string::npos) << clash.out;
  EXPECT_EQ(testing::FileBytes(ft + ".json"), report_before);
  // passkey reads it too: native is the recorded linear s = 2.
  const testing::CliResult pk = testing::RunPosenc(
      "passkey --model " + ft + " --lengths 256 --depths 0.5 --trials 1 --methods native", "2>&1");
  ASSERT_EQ(pk.status, 0) << pk.out;
  EXPECT_NE(pk.out.find("trained with linear s = 2"), std::string::npos) << pk.out;
  EXPECT_NE(pk.out.find("| 256 | native | 2 |"), std::string::npos) << pk.out;
}

}  // namespace
}  // namespace posenc
