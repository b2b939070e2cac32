// Evaluating a posenc fine-tune checkpoint through its training report (<checkpoint>.json): the recorded method
// and factor are the llama2.c checkpoint's native RoPE, its L0 is L0, and the held-out documents are the text
// (the same tokens the run held out); the report is found only for its own checkpoint; the held-out cut keeps
// documents exactly; the command line's defaults, its --no-training-report and its refusal to overwrite the report.
#include "posenc/eval/training_record.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/formats_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/eval/documents.h"
#include "posenc/eval/evaluate.h"
#include "posenc/model/loader.h"
#include "posenc/train/run.h"
#include "test_util.h"

namespace posenc {
namespace {

using nlohmann::json;
using testing::ExpectThrowWith;

const std::string kData = POSENC_DATA_DIR;
const std::string kSample = kData + "/text/tinystories_sample_cs336.txt";  // 6 documents: 4 train, 2 held out

// stories260K (L0 512) fine-tuned one step with linear s = 2 at ctx 32 on the sample text, written to `out`
// (a llama2.c file for .bin).
TrainRunOptions FinetuneOptions(const std::string& out) {
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
  return o;
}

TrainRunReport Finetune(const std::string& out) { return RunTraining(FinetuneOptions(out), {}, nullptr); }

EvalOptions Eval(const std::string& model, std::vector<RopeMethod> methods) {
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
  const std::optional<TrainingRecord> rec = FindTrainingRecord(ft).record;
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
  EXPECT_EQ(rec->text_fingerprint.size(), 18u);  // "0x" + 16 hex digits

  EvalOptions o = Eval(ft, {RopeMethod::kNone, RopeMethod::kNative, RopeMethod::kLinear});
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
  const EvalReport plain = RunEval(Eval(ft, {RopeMethod::kNone, RopeMethod::kNative}));
  EXPECT_EQ(plain.rows[1].factor, 1.0);
  EXPECT_EQ(plain.rows[1].result.ppl, plain.rows[0].result.ppl);
  EXPECT_TRUE(plain.text_part.empty());

  // The training text itself with the record: scored whole, with a note that most of it was trained on.
  EvalOptions whole = Eval(ft, {RopeMethod::kNative});
  whole.training_record = rec;
  whole.text_path = rec->text_path;
  noted = false;
  for (const std::string& n : RunEval(whole).model_warnings) {
    noted = noted || n.find("the text is the one the checkpoint was trained on") != n.npos;
  }
  EXPECT_TRUE(noted);

  // Held-out documents of another text are refused.
  EvalOptions other = Eval(ft, {RopeMethod::kNative});
  other.training_record = rec;
  other.text_path = kData + "/text/tinystories_val_stories.txt";
  other.held_out_documents = true;
  ExpectThrowWith<ConfigError>([&] { RunEval(other); }, {"held-out documents need the training record", "trained on"});
}

TEST(TrainingRecord, FoundOnlyForItsOwnCheckpointAndSaysWhyNot) {
  testing::TempDir dir("training_record_find");
  const std::string ft = dir / "ft.bin";
  Finetune(ft);
  auto note_of = [](const std::string& model) {
    const TrainingRecordLookup l = FindTrainingRecord(model);
    EXPECT_FALSE(l.record.has_value()) << model;
    return l.note;
  };
  // No report beside a file: nothing, and nothing to say.
  EXPECT_TRUE(note_of(kData + "/stories260K.bin").empty());
  // A copy of the checkpoint with a copy of its report: the report names ft.bin, not copy.bin.
  std::filesystem::copy_file(ft, dir / "copy.bin");
  std::filesystem::copy_file(ft + ".json", dir / "copy.bin.json");
  EXPECT_NE(note_of(dir / "copy.bin").find("is the training report of [\"" + ft + "\"], not of copy.bin"),
            std::string::npos) << note_of(dir / "copy.bin");
  // JSON of something else, no JSON at all, a directory: not used, and said.
  std::filesystem::copy_file(ft, dir / "x.bin");
  std::ofstream(dir / "x.bin.json") << R"({"rows": []})";
  EXPECT_NE(note_of(dir / "x.bin").find("is not a posenc training report"), std::string::npos);
  std::filesystem::copy_file(ft, dir / "y.bin");
  std::ofstream(dir / "y.bin.json") << R"({"rope": {"method": "yarn")";
  EXPECT_NE(note_of(dir / "y.bin").find("is not JSON"), std::string::npos);
  std::filesystem::copy_file(ft, dir / "z.bin");
  std::filesystem::create_directory(dir / "z.bin.json");
  EXPECT_NE(note_of(dir / "z.bin").find("is not a regular file"), std::string::npos);
  // A symbolic link to the checkpoint finds the report of the file it points to.
  std::filesystem::create_symlink(ft, dir / "link.bin");
  const TrainingRecordLookup linked = FindTrainingRecord(dir / "link.bin");
  ASSERT_TRUE(linked.record.has_value()) << linked.note;
  EXPECT_EQ(linked.record->report_path, ft + ".json");

  // A training report of this checkpoint with a bad key is an error naming the key and the value as written.
  const json good = json::parse(testing::FileBytes(ft + ".json"));
  auto with = [&](const std::function<void(json&)>& edit) {
    json j = good;
    edit(j);
    std::filesystem::remove(ft + ".json");
    std::ofstream(ft + ".json") << j.dump();
  };
  const struct {
    std::function<void(json&)> edit;
    std::vector<std::string> message;
  } bad[] = {
      {[](json& j) { j["rope"]["factor"] = 0.5; }, {"ft.bin.json", "rope.factor", "0.5"}},
      {[](json& j) { j["rope"]["factor"] = "two"; }, {"ft.bin.json", "missing or of the wrong type"}},
      {[](json& j) { j["rope"]["method"] = "bogus"; }, {"ft.bin.json", "rope.method", "unknown method 'bogus'"}},
      {[](json& j) { j["rope"]["method"] = "native"; }, {"ft.bin.json", "'native' is not a method a training run"}},
      {[](json& j) { j["rope"]["method"] = "dca"; }, {"ft.bin.json", "'dca' is not a method a training run"}},
      {[](json& j) { j["rope"]["original_max_position_embeddings"] = 512.9; },
       {"rope.original_max_position_embeddings must be an integer", "512.9"}},
      {[](json& j) { j["rope"]["original_max_position_embeddings"] = 18446744073709551615ull; },
       {"rope.original_max_position_embeddings", "18446744073709551615"}},
      {[](json& j) { j["split"]["n_train_documents"] = 1.9; }, {"split.n_train_documents", "1.9"}},
      {[](json& j) { j["split"]["n_documents"] = 1e30; }, {"split.n_documents", "1e+30"}},
      {[](json& j) { j["split"]["n_train_documents"] = 7; }, {"split.n_train_documents", "n_documents = 6", "7"}},
  };
  for (const auto& b : bad) {
    with(b.edit);
    ExpectThrowWith<ConfigError>([&] { FindTrainingRecord(ft); }, b.message);
  }
  // An older report without the texts: found, without a split; its held-out part cannot be cut.
  with([](json& j) {
    j.erase("text");
    j.erase("held_out_text");
  });
  const std::optional<TrainingRecord> old = FindTrainingRecord(ft).record;
  ASSERT_TRUE(old.has_value());
  EXPECT_FALSE(old->has_split);
  ExpectThrowWith<ConfigError>([&] { HeldOutDocuments(*old, "a"); }, {"does not state its texts and split"});
}

// A checkpoint of an --eval-at step (<stem>.step<N><ext>) takes the run's one report.
TEST(TrainingRecord, EvalAtCheckpointsTakeTheRunsReport) {
  testing::TempDir dir("training_record_steps");
  TrainRunOptions o = FinetuneOptions(dir / "ft.bin");
  o.steps = 2;
  o.eval_at = {1, 2};
  RunTraining(o, {}, nullptr);
  const TrainingRecordLookup step = FindTrainingRecord(dir / "ft.step1.bin");
  ASSERT_TRUE(step.record.has_value()) << step.note;
  EXPECT_EQ(step.record->report_path, (dir / "ft.bin") + ".json");
  EXPECT_EQ(step.record->method, "linear");
}

// A GGUF checkpoint states its own RoPE: a report that contradicts it is not applied (nor its L0), and said.
TEST(TrainingRecord, AReportThatContradictsTheFileIsNotApplied) {
  testing::TempDir dir("training_record_gguf");
  TrainRunOptions o = FinetuneOptions(dir / "ft.gguf");
  o.method = "yarn";
  RunTraining(o, {}, nullptr);
  const std::optional<TrainingRecord> rec = FindTrainingRecord(dir / "ft.gguf").record;
  ASSERT_TRUE(rec.has_value());
  ModelConfig c = LoadModelFile(dir / "ft.gguf").config;
  const std::vector<std::string> agree = ApplyTrainingRecord(*rec, ModelFormat::kGguf, c);  // yarn x2 from L0 512
  ASSERT_EQ(agree.size(), 1u);
  EXPECT_NE(agree[0].find("trained with yarn s = 2 from L0 512"), std::string::npos) << agree[0];
  EXPECT_EQ(agree[0].find("not applied"), std::string::npos) << agree[0];
  TrainingRecord other = *rec;
  other.method = "linear";
  other.factor = 4.0;
  other.original_ctx = 256;
  ModelConfig c2 = LoadModelFile(dir / "ft.gguf").config;
  const std::vector<std::string> notes = ApplyTrainingRecord(other, ModelFormat::kGguf, c2);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("says linear s = 4, the file states yarn s = 2"), std::string::npos) << notes[0];
  EXPECT_EQ(c2.train_ctx, 512);
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
  // The same number of documents in another order: the fingerprint tells.
  r.n_documents = 4;
  r.n_train_documents = 2;
  r.text_fingerprint = FingerprintHex(cases[0]);
  EXPECT_NO_THROW(HeldOutDocuments(r, cases[0]));
  const std::string reordered = "two" + sep + "one" + sep + "three" + sep + "four\n";
  ExpectThrowWith<ConfigError>([&] { HeldOutDocuments(r, reordered); },
                               {"t.txt is not the text the training run read", "fingerprint", "changed"});
  r.text_fingerprint.clear();
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
  // Nor may passkey's training text replace it.
  const testing::CliResult text_clash =
      testing::RunPosenc("passkey --model " + ft + " --write-training-text " + ft + ".json --documents 2", "2>&1");
  EXPECT_EQ(text_clash.status, 1);
  EXPECT_NE(text_clash.out.find("training report"), std::string::npos) << text_clash.out;
  EXPECT_EQ(testing::FileBytes(ft + ".json"), report_before);
  // passkey reads it too: native is the recorded linear s = 2.
  const testing::CliResult pk = testing::RunPosenc(
      "passkey --model " + ft + " --lengths 256 --depths 0.5 --trials 1 --methods native", "2>&1");
  ASSERT_EQ(pk.status, 0) << pk.out;
  EXPECT_NE(pk.out.find("trained with linear s = 2"), std::string::npos) << pk.out;
  EXPECT_NE(pk.out.find("| 256 | native | 2 |"), std::string::npos) << pk.out;
}

// A run with --holdout: its held-out file is the default text, named as such; the training text then is all
// trained on, and said.
TEST(TrainingRecord, HoldoutFileIsTheDefaultText) {
  testing::TempDir dir("training_record_holdout");
  TrainRunOptions o = FinetuneOptions(dir / "h.bin");
  o.held_out_path = kData + "/text/tinystories_val_stories.txt";
  RunTraining(o, {}, nullptr);
  const std::string out = dir / "e.json";
  const testing::CliResult r = testing::RunPosenc(
      "eval --model " + (dir / "h.bin") + " --ctx 32 --methods native --tokens 64 --json " + out, "2>&1");
  ASSERT_EQ(r.status, 0) << r.out;
  const json j = json::parse(testing::FileBytes(out));
  EXPECT_EQ(j.at("text"), std::filesystem::absolute(o.held_out_path).lexically_normal().string());
  EXPECT_EQ(j.at("text_part"), "the held-out text of the training run (" + (dir / "h.bin") + ".json)");
  EvalOptions e = Eval(dir / "h.bin", {RopeMethod::kNative});
  e.training_record = FindTrainingRecord(dir / "h.bin").record;
  bool noted = false;
  for (const std::string& n : RunEval(e).model_warnings) noted = noted || n.find("every document of it") != n.npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace posenc
