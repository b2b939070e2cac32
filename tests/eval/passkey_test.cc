// Passkey retrieval: the prompt is the landmark-attention / YaRN prompt character for character (the expected
// text below was produced by running the reference's generate_prompt construction in Python with
// n_garbage = 100, n_garbage_prefix = 30, pass_key = 12345), prompts fit their token budget at a bisection
// boundary, the answer's integer is read as re.search(r'\d+') and int() read it, and the draft-checked greedy
// decoding gives exactly the tokens of one-token-per-pass greedy decoding.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/passkey.h"
#include "posenc/model/sampler.h"
#include "posenc/report/passkey_report.h"
#include "test_util.h"

namespace posenc {
namespace {

TEST(PasskeyPrompt, IsTheReferencePromptCharacterForCharacter) {
  const std::string expected =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. I will quiz "
      "you about the important information there.\nThe grass is green. The sky is\nThe pass key is 12345. "
      "Remember it. 12345 is the pass key.\nThe grass is green. The sky is blue. The sun is yellow. Here we go. "
      "Th\nWhat is the pass key? The pass key is";
  EXPECT_EQ(PasskeyPromptText(12345, 100, 30), expected);
}

TEST(PasskeyPrompt, FillerRepeatsJoinedBySpaces) {
  EXPECT_EQ(PasskeyFillerText(0), "");
  EXPECT_EQ(PasskeyFillerText(5), "The g");
  // " ".join([garbage] * N)[85:95] in the reference: the end of one copy, the joining space, the next copy.
  EXPECT_EQ(PasskeyFillerText(200).substr(85, 10), "ain. The g");
  EXPECT_EQ(PasskeyFillerText(1000).size(), 1000u);
  EXPECT_THROW(PasskeyFillerText(-1), RangeError);
  EXPECT_THROW(PasskeyPromptText(1, 10, 11), RangeError);
  EXPECT_THROW(PasskeyPromptText(1, 10, -1), RangeError);
}

TEST(PasskeyPrompt, DepthPlacesTheKeyByRounding) {
  EXPECT_EQ(PasskeyPrefixChars(100, 0.0), 0);
  EXPECT_EQ(PasskeyPrefixChars(100, 1.0), 100);
  EXPECT_EQ(PasskeyPrefixChars(10, 0.25), 3);  // 2.5 rounds away from zero
  EXPECT_EQ(PasskeyPrefixChars(0, 0.5), 0);
  testing::ExpectThrowWith<RangeError>([] { PasskeyPrefixChars(10, 1.5); }, {"depth", "1.5"});
  EXPECT_THROW(PasskeyPrefixChars(10, std::nan("")), RangeError);
}

TEST(PasskeyKeys, UniformInRangeAndFixedBySeed) {
  const std::vector<int64_t> a = PasskeyKeys(1, 2000), b = PasskeyKeys(1, 2000), c = PasskeyKeys(2, 2000);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  for (int64_t k : a) {
    ASSERT_GE(k, 1);
    ASSERT_LE(k, kPasskeyMaxKey);
  }
  // Uniform on [1, 50000]: mean 25000.5, standard deviation 50000 / sqrt(12) = 14434; the mean of 2000 draws is
  // within 5 standard errors (1614) of it.
  const double mean = std::accumulate(a.begin(), a.end(), 0.0) / static_cast<double>(a.size());
  EXPECT_NEAR(mean, 25000.5, 5 * 14434.0 / std::sqrt(2000.0));
  EXPECT_GT(std::set<int64_t>(a.begin(), a.end()).size(), 1900u);  // few repeats among 2000 of 50000
  EXPECT_TRUE(PasskeyKeys(1, 0).empty());
}

TEST(PasskeyPrompt, FitsTheBudgetAtABoundary) {
  const Tokenizer& tok = testing::Tok512();
  for (int64_t budget : {200, 246, 500, 1000}) {
    for (double depth : {0.0, 0.5, 1.0}) {
      const FittedPasskeyPrompt p = FitPasskeyPrompt(tok, true, budget, 4242, depth);
      EXPECT_LE(static_cast<int64_t>(p.ids.size()), budget);
      EXPECT_EQ(p.ids, tok.Encode(p.text, true));
      EXPECT_EQ(p.text, PasskeyPromptText(4242, p.filler_chars, p.prefix_chars));
      EXPECT_EQ(p.prefix_chars, PasskeyPrefixChars(p.filler_chars, depth));
      // One more filler character no longer fits.
      const std::string longer =
          PasskeyPromptText(4242, p.filler_chars + 1, PasskeyPrefixChars(p.filler_chars + 1, depth));
      EXPECT_GT(static_cast<int64_t>(tok.Encode(longer, true).size()), budget) << budget << " " << depth;
    }
  }
  const int64_t bare = static_cast<int64_t>(tok.Encode(PasskeyPromptText(4242, 0, 0), true).size());
  testing::ExpectThrowWith<ConfigError>([&] { FitPasskeyPrompt(tok, true, bare - 1, 4242, 0.5); },
                                            {"without filler", std::to_string(bare), std::to_string(bare - 1)});
}

TEST(PasskeyAnswer, FirstIntegerAsTheReferenceReadsIt) {
  const auto first = [](const std::string& s) { return FindFirstInteger(s); };
  EXPECT_FALSE(first("no digits here").has_value());
  EXPECT_EQ(first(" 12345.")->digits, "12345");
  EXPECT_TRUE(first(" 12345.")->complete);
  EXPECT_FALSE(first(" 123")->complete);  // a later token may add digits
  EXPECT_EQ(first("x007y 9")->digits, "007");
  EXPECT_TRUE(SameInteger("007", 7));
  EXPECT_TRUE(SameInteger("12345", 12345));
  EXPECT_FALSE(SameInteger("12346", 12345));
  EXPECT_FALSE(SameInteger("123450", 12345));
  EXPECT_FALSE(SameInteger("000", 1));
}

// One token per forward pass, the whole sequence each time: the plain definition of greedy decoding.
std::vector<int> PlainGreedy(const Transformer& model, const ForwardRope& rope, const Tokenizer& tok,
                             std::vector<int> seq, int64_t max_new) {
  std::vector<int> out;
  ForwardState state;
  const int64_t vocab = model.config().vocab_size;
  Sampler greedy(0.0f, 0.0f, 1);
  for (int64_t i = 0; i < max_new; ++i) {
    std::vector<int64_t> pos(seq.size());
    std::iota(pos.begin(), pos.end(), int64_t{0});
    std::vector<float> logits(static_cast<size_t>(vocab));
    model.Forward(seq, pos, rope, state, logits.data(), static_cast<int64_t>(seq.size()) - 1);
    const int next = greedy.Sample(logits);
    if (next == tok.eos_id()) break;
    out.push_back(next);
    seq.push_back(next);
  }
  return out;
}

TEST(PasskeyAnswer, DraftCheckedDecodingIsGreedyDecoding) {
  const Transformer& model = testing::Stories260K();
  const Tokenizer& tok = testing::Tok512();
  const MethodRope rope = BuildMethodRope(RopeMethod::kYarn, 512, model.config());
  const FittedPasskeyPrompt p = FitPasskeyPrompt(tok, true, 300, 31337, 0.5);
  const std::vector<int> plain = PlainGreedy(model, rope.forward(), tok, p.ids, 10);
  ASSERT_EQ(plain.size(), 10u);
  // stories260K answers with words, not digits: every answer runs the whole budget.
  ASSERT_FALSE(FindFirstInteger(tok.Decode(plain)).has_value()) << tok.Decode(plain);
  ForwardState state;
  // No draft: one pass per token.
  PasskeyAnswer a = GreedyPasskeyAnswer(model, rope.forward(), tok, p.ids, {}, 31337, 10, state);
  EXPECT_EQ(a.generated, plain);
  EXPECT_EQ(a.forwards, 10);
  EXPECT_EQ(a.response, tok.Decode(plain));
  EXPECT_FALSE(a.answer.has_value());
  EXPECT_FALSE(a.correct);
  // The model's own answer as the draft: one pass checks nine tokens and yields the tenth.
  a = GreedyPasskeyAnswer(model, rope.forward(), tok, p.ids, plain, 31337, 10, state);
  EXPECT_EQ(a.generated, plain);
  EXPECT_EQ(a.forwards, 1);
  // A draft wrong at its fourth token: the first pass keeps three tokens and the model's fourth, then the
  // draft is dropped and each further token takes a pass (6 more).
  std::vector<int> wrong = plain;
  wrong[3] = plain[3] == 5 ? 6 : 5;
  a = GreedyPasskeyAnswer(model, rope.forward(), tok, p.ids, wrong, 31337, 10, state);
  EXPECT_EQ(a.generated, plain);
  EXPECT_EQ(a.forwards, 7);
  // A position map (self-extend) goes through the same forward.
  const MethodRope se = BuildMethodRope(RopeMethod::kSelfExtend, 1024, model.config());
  const FittedPasskeyPrompt q = FitPasskeyPrompt(tok, true, 600, 31337, 0.25);
  EXPECT_EQ(GreedyPasskeyAnswer(model, se.forward(), tok, q.ids, {}, 31337, 3, state).generated,
            PlainGreedy(model, se.forward(), tok, q.ids, 3));
  EXPECT_THROW(GreedyPasskeyAnswer(model, rope.forward(), tok, {}, {}, 1, 10, state), ConfigError);
  EXPECT_THROW(GreedyPasskeyAnswer(model, rope.forward(), tok, p.ids, {}, 1, 0, state), ConfigError);
}

TEST(PasskeyAnswer, DraftIsTheKeysContinuation) {
  const Tokenizer& tok = testing::Tok512();
  const FittedPasskeyPrompt p = FitPasskeyPrompt(tok, true, 300, 4021, 0.5);
  const std::vector<int> draft = PasskeyDraft(tok, true, p.text, p.ids, 4021);
  ASSERT_FALSE(draft.empty());
  EXPECT_EQ(tok.Decode(draft), " 4021.");
  std::vector<int> whole = p.ids;
  whole.insert(whole.end(), draft.begin(), draft.end());
  EXPECT_EQ(whole, tok.Encode(p.text + " 4021.", true));
}

PasskeyOptions SmallRun() {
  PasskeyOptions o;
  o.model_path = testing::ModelPath();
  o.tokenizer_path = testing::TokenizerPath();
  o.lengths = {256, 600};
  o.depths = {0.0, 1.0};
  o.trials = 2;
  o.methods = {RopeMethod::kNone, RopeMethod::kSelfExtend};
  o.max_new_tokens = 3;
  o.threads = 2;
  return o;
}

TEST(RunPasskey, CellsPerLengthMethodAndDepthFromTheSameKeys) {
  std::vector<std::pair<size_t, size_t>> blocks;
  const PasskeyReport r = RunPasskey(SmallRun(), [&](const PasskeyReport&, size_t first, size_t count) {
    blocks.emplace_back(first, count);
  });
  ASSERT_EQ(r.rows.size(), 8u);  // 2 lengths x 2 methods x 2 depths
  EXPECT_EQ(blocks, (std::vector<std::pair<size_t, size_t>>{{0, 2}, {2, 2}, {4, 2}, {6, 2}}));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.keys, PasskeyKeys(1, 2));
  EXPECT_TRUE(r.add_bos);
  for (size_t i = 0; i < r.rows.size(); ++i) {
    const PasskeyRow& row = r.rows[i];
    EXPECT_EQ(row.length, i < 4 ? 256 : 600);
    EXPECT_EQ(row.method, (i / 2) % 2 == 0 ? RopeMethod::kNone : RopeMethod::kSelfExtend);
    EXPECT_EQ(row.depth, i % 2 == 0 ? 0.0 : 1.0);
    ASSERT_EQ(row.results.size(), 2u);
    int64_t correct = 0;
    for (size_t t = 0; t < 2; ++t) {
      const PasskeyTrial& trial = row.results[t];
      EXPECT_EQ(trial.key, r.keys[t]);
      EXPECT_LE(trial.prompt_tokens, row.length - 3);  // the answer's 3 tokens fit in the length
      EXPECT_EQ(trial.prefix_chars, row.depth == 0.0 ? 0 : trial.filler_chars);
      correct += trial.correct ? 1 : 0;
    }
    EXPECT_EQ(row.correct, correct);
    EXPECT_DOUBLE_EQ(row.accuracy, static_cast<double>(correct) / 2.0);
    EXPECT_EQ(row.parameters.empty(), row.method == RopeMethod::kNone);
  }
  EXPECT_EQ(FormatPasskeyFooter(r), fmt::format("self-extend at 256: {}\nself-extend at 600: {}\n",
                                                r.rows[2].parameters, r.rows[6].parameters));
  // The same prompts for both methods at a length.
  EXPECT_EQ(r.rows[0].results[1].filler_chars, r.rows[2].results[1].filler_chars);
  // At 256 <= L0 = 512 self-extend changes nothing the first 256 positions see: the same responses.
  EXPECT_EQ(r.rows[0].results[0].response, r.rows[2].results[0].response);
}

TEST(RunPasskey, ResultsDoNotDependOnTheThreadCount) {
  PasskeyOptions one = SmallRun(), two = SmallRun();
  one.threads = 1;
  one.lengths = two.lengths = {600};
  const PasskeyReport a = RunPasskey(one), b = RunPasskey(two);
  ASSERT_EQ(a.rows.size(), b.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    for (size_t t = 0; t < a.rows[i].results.size(); ++t) {
      EXPECT_EQ(a.rows[i].results[t].response, b.rows[i].results[t].response);
    }
  }
}

TEST(RunPasskey, BadOptionsNameTheField) {
  PasskeyOptions o = SmallRun();
  o.depths = {0.5, 1.5};
  testing::ExpectThrowWith<ConfigError>([&] { RunPasskey(o); }, {"depths", "1.5"});
  o = SmallRun();
  o.trials = 0;
  testing::ExpectThrowWith<ConfigError>([&] { RunPasskey(o); }, {"trials", "0"});
  o = SmallRun();
  o.lengths = {3};
  testing::ExpectThrowWith<ConfigError>([&] { RunPasskey(o); }, {"length", "3", "max_new_tokens"});
  o = SmallRun();
  o.lengths = {100};  // the bare prompt of tok512 needs more than 97 tokens
  testing::ExpectThrowWith<ConfigError>([&] { RunPasskey(o); }, {"length (`lengths`) 100", "without filler"});
  o = SmallRun();
  o.methods.clear();
  EXPECT_THROW(RunPasskey(o), ConfigError);
  o = SmallRun();
  o.methods = {RopeMethod::kYarn, RopeMethod::kYarn};
  testing::ExpectThrowWith<ConfigError>([&] { RunPasskey(o); }, {"`methods` lists 'yarn' twice"});
}

// The bundled retrieval model (scripts/make_passkey_model.sh) is bundled to retrieve: at its training length,
// 100 prompts (20 keys at 5 depths), at least 95 answered right (99 when it was made).
TEST(PasskeyBundledModel, RetrievesAtItsTrainingLength) {
  PasskeyOptions o;
  o.model_path = testing::DataPath("passkey/passkey256.bin");
  o.tokenizer_path = testing::TokenizerPath();
  o.lengths = {256};
  o.trials = 20;
  o.methods = {RopeMethod::kNone};
  const PasskeyReport r = RunPasskey(o);
  EXPECT_EQ(r.config.train_ctx, 256);
  EXPECT_GE(r.config.head_dim, 32);
  int64_t correct = 0, trials = 0;
  for (const PasskeyRow& row : r.rows) {
    correct += row.correct;
    trials += row.trials;
  }
  EXPECT_EQ(trials, 100);
  EXPECT_GE(correct, 95);
}

TEST(PasskeyTrainingText, DocumentsFitTheirLengthsAndRepeat) {
  const Tokenizer& tok = testing::Tok512();
  omp_set_num_threads(1);
  const std::string one = PasskeyTrainingText(tok, true, 30, 256, 10, 7);
  omp_set_num_threads(2);
  const std::string two = PasskeyTrainingText(tok, true, 30, 256, 10, 7);
  EXPECT_EQ(one, two);
  EXPECT_NE(one, PasskeyTrainingText(tok, true, 30, 256, 10, 8));
  // 30 documents split by "<|endoftext|>" lines; each is a prompt, then " K." with the prompt's own key.
  std::vector<std::string> docs;
  size_t start = 0;
  const std::string sep = "\n<|endoftext|>\n";
  for (size_t at; (at = one.find(sep, start)) != std::string::npos; start = at + sep.size()) {
    docs.push_back(one.substr(start, at - start));
  }
  docs.push_back(one.substr(start, one.size() - 1 - start));  // the text ends in "\n"
  ASSERT_EQ(docs.size(), 30u);
  for (const std::string& d : docs) {
    const size_t q = d.rfind(std::string(kPasskeyQuestion));
    ASSERT_NE(q, std::string::npos);
    const std::string answer = d.substr(q + kPasskeyQuestion.size());  // " K."
    const std::string key = answer.substr(1, answer.size() - 2);
    EXPECT_NE(d.find(PasskeyKeyLine(std::stoll(key))), std::string::npos) << d;
    EXPECT_EQ(answer.back(), '.');
    EXPECT_LE(static_cast<int64_t>(tok.Encode(d.substr(0, q + kPasskeyQuestion.size()), true).size()), 256 - 10);
  }
  EXPECT_THROW(PasskeyTrainingText(tok, true, 0, 256, 10, 7), ConfigError);
  testing::ExpectThrowWith<ConfigError>([&] { PasskeyTrainingText(tok, true, 3, 120, 10, 7); },
                                        {"`max_tokens` 120", "without filler"});
}

TEST(PasskeyReportTest, TableAndJsonHoldEveryCell) {
  PasskeyOptions o = SmallRun();
  o.lengths = {256};
  o.methods = {RopeMethod::kNone};
  const PasskeyReport r = RunPasskey(o);
  EXPECT_EQ(FormatPasskeyHeader(r), "| length | method | factor | depth 0 | depth 1 | accuracy |\n"
                                    "|---:|---|---:|---:|---:|---:|\n");
  const std::string line = FormatPasskeyLines(r, 0, 2);
  EXPECT_EQ(line.rfind("| 256 | none | 1 | ", 0), 0u) << line;
  const nlohmann::json j = PasskeyJson(r);
  EXPECT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["keys"], nlohmann::json(r.keys));
  EXPECT_EQ(j["rows"][1]["depth"], 1.0);
  EXPECT_EQ(j["rows"][0]["results"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["results"][0]["key"], r.keys[0]);
  EXPECT_TRUE(j["complete"].get<bool>());
  for (const auto& row : j["rows"]) {
    for (const char* k : {"length", "depth", "method", "trials", "correct", "accuracy"}) EXPECT_TRUE(row.contains(k)) << k;
  }
}

}  // namespace
}  // namespace posenc
