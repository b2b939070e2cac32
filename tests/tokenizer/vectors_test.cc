// llama.cpp's tokenizer vectors (the ids Hugging Face's tokenizers give for 46 strings per vocabulary), through
// every path: the GGUF vocabularies, the Llama 2 tokenizer.model (sentencepiece), tokenizer.json files built
// from the same vocabularies, and the `posenc tokenize` command.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/formats/gguf.h"
#include "posenc/tokenizer/bpe.h"
#include "posenc/tokenizer/gguf_vocab.h"
#include "posenc/tokenizer/hf_tokenizer_json.h"
#include "posenc/tokenizer/load.h"
#include "posenc/tokenizer/pretokenize.h"
#include "posenc/tokenizer/spm.h"
#include "test_util.h"
#include "tokenizer/tokenizer_test_util.h"

namespace posenc {
namespace {

using testing::VectorInputs;
using testing::VectorOutputs;

std::string Ids(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) {
    s += ' ';
    s += std::to_string(id);
  }
  return s;
}

class VocabVectorsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(VocabVectorsTest, GgufGivesTheReferenceIds) {
  const std::string name = GetParam();
  const std::vector<std::string> inputs = VectorInputs(name);
  const std::vector<std::vector<int>> expected = VectorOutputs(name);
  ASSERT_EQ(inputs.size(), 46u);
  ASSERT_EQ(expected.size(), inputs.size());
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(testing::VocabGguf(name));
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> ids = tok->Encode(inputs[i], /*add_bos=*/false);
    EXPECT_EQ(ids, expected[i]) << name << " string " << i << " '" << inputs[i] << "': got" << Ids(ids);
    passed += ids == expected[i];
  }
  RecordProperty("vectors_passed", passed);
  EXPECT_EQ(passed, 46);
}

TEST_P(VocabVectorsTest, HeapEncodeEqualsThePlainLoop) {
  const std::string name = GetParam();
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(testing::VocabGguf(name));
  for (const std::string& s : VectorInputs(name)) {
    std::vector<int> reference;
    if (const auto* spm = dynamic_cast<const SpmTokenizer*>(tok.get())) reference = spm->EncodeReference(s);
    if (const auto* bpe = dynamic_cast<const BpeTokenizer*>(tok.get())) reference = bpe->EncodeReference(s);
    ASSERT_FALSE(reference.empty() && !s.empty()) << name << ": neither SPM nor BPE";
    EXPECT_EQ(tok->Encode(s, false), reference) << name << " '" << s << "'";
  }
}

TEST_P(VocabVectorsTest, DecodeRoundTrips) {
  const std::string name = GetParam();
  const std::unique_ptr<Tokenizer> tok = LoadTokenizer(testing::VocabGguf(name));
  for (const std::string& s : VectorInputs(name)) {
    EXPECT_EQ(tok->Decode(tok->Encode(s, false)), s) << name;
    EXPECT_EQ(tok->Decode(tok->Encode(s, true)), s) << name << " with BOS";  // BOS decodes to nothing
  }
}

// One `posenc tokenize` run with every string as its own --text-file: one line of ids per string.
TEST_P(VocabVectorsTest, CliGivesTheReferenceIds) {
  const std::string name = GetParam();
  const std::vector<std::string> inputs = VectorInputs(name);
  const std::vector<std::vector<int>> expected = VectorOutputs(name);
  std::string args = "tokenize --model '" + testing::VocabGguf(name) + "' --add-bos no";
  std::vector<std::string> files;
  for (size_t i = 0; i < inputs.size(); ++i) {
    files.push_back(::testing::TempDir() + "posenc_vector_" + name + "_" + std::to_string(i) + ".txt");
    std::ofstream(files.back(), std::ios::binary) << inputs[i];
    args += " --text-file '" + files.back() + "'";
  }
  const testing::CliResult r = testing::RunPosenc(args, "2>&1");
  for (const std::string& f : files) std::remove(f.c_str());
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int passed = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSERT_TRUE(std::getline(lines, line)) << name << ": output ends before string " << i;
    const std::string want = Ids(expected[i]).substr(expected[i].empty() ? 0 : 1);
    EXPECT_EQ(line, want) << name << " string " << i;
    passed += line == want;
  }
  EXPECT_FALSE(std::getline(lines, line)) << "extra output: " << line;
  EXPECT_EQ(passed, 46);
}

INSTANTIATE_TEST_SUITE_P(Vocabs, VocabVectorsTest, ::testing::ValuesIn(testing::VectorVocabs()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string n = info.param;
                           for (char& c : n) c = c == '-' ? '_' : c;
                           return n;
                         });

// The Llama 2 tokenizer.model is the llama-spm vocabulary: the sentencepiece library must give the vectors and
// the same ids as the GGUF path.
TEST(SentencePieceVectorsTest, TokenizerModelGivesTheLlamaSpmIds) {
  const std::unique_ptr<Tokenizer> sp = LoadTokenizer(testing::Llama2TokenizerModel());
  const std::unique_ptr<Tokenizer> gguf = LoadTokenizer(testing::VocabGguf("llama-spm"));
  const std::vector<std::string> inputs = VectorInputs("llama-spm");
  const std::vector<std::vector<int>> expected = VectorOutputs("llama-spm");
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<int> ids = sp->Encode(inputs[i], false);
    EXPECT_EQ(ids, expected[i]) << "string " << i;
    EXPECT_EQ(ids, gguf->Encode(inputs[i], false)) << "string " << i;
    EXPECT_EQ(sp->Decode(ids), inputs[i]);
  }
  EXPECT_EQ(sp->vocab_size(), gguf->vocab_size());
  EXPECT_EQ(sp->bos_id(), gguf->bos_id());
  EXPECT_EQ(sp->eos_id(), gguf->eos_id());
  for (int id = 0; id < sp->vocab_size(); ++id) {
    ASSERT_EQ(sp->Piece(id), gguf->Piece(id)) << id;
    ASSERT_EQ(sp->Type(id), gguf->Type(id)) << id;
  }
}

// tokenizer.json files holding the GGUF vocabularies with their models' real pre_tokenizer layouts: GPT-2's
// ByteLevel (HF's own regex), StarCoder's Digits + ByteLevel, DeepSeek LLM's Split list + ByteLevel without
// regex (the same patterns as the GGUF pre-tokenizer).
std::string TokenizerJsonFromGguf(const std::string& name, const nlohmann::json& pre_tokenizer) {
  const GgufFile g = GgufFile::Open(testing::VocabGguf(name));
  const BpeVocab v = ReadGgufBpeVocab(g);
  nlohmann::json vocab = nlohmann::json::object(), added = nlohmann::json::array(), merges = nlohmann::json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    vocab[v.tokens[i]] = i;
    if (v.types[i] == TokenType::kControl || v.types[i] == TokenType::kUserDefined) {
      added.push_back({{"id", i}, {"content", v.tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", v.types[i] == TokenType::kControl}});
    }
  }
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  const nlohmann::json j = {{"version", "1.0"},
                            {"added_tokens", added},
                            {"normalizer", nullptr},
                            {"pre_tokenizer", pre_tokenizer},
                            {"post_processor", nullptr},
                            {"decoder", {{"type", "ByteLevel"}}},
                            {"model",
                             {{"type", "BPE"},
                              {"dropout", nullptr},
                              {"unk_token", nullptr},
                              {"continuing_subword_prefix", nullptr},
                              {"end_of_word_suffix", nullptr},
                              {"fuse_unk", false},
                              {"vocab", vocab},
                              {"merges", merges}}}};
  return j.dump();
}

nlohmann::json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

TEST(TokenizerJsonVectorsTest, ByteLevelFamiliesGiveTheReferenceIds) {
  nlohmann::json deepseek_steps = nlohmann::json::array();
  const PreTokenizer deepseek = GgufPreTokenizer("deepseek-llm");
  for (const PreTokenizerStep& s : deepseek.steps()) {
    deepseek_steps.push_back(
        {{"type", "Split"}, {"pattern", {{"Regex", s.pattern}}}, {"behavior", "Isolated"}, {"invert", false}});
  }
  deepseek_steps.push_back(ByteLevel(false));
  const std::vector<std::pair<std::string, nlohmann::json>> cases = {
      {"gpt-2", ByteLevel(true)},
      {"starcoder",
       {{"type", "Sequence"},
        {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(true)}}}},
      {"deepseek-llm", {{"type", "Sequence"}, {"pretokenizers", deepseek_steps}}},
  };
  for (const auto& [name, pre] : cases) {
    const std::unique_ptr<BpeTokenizer> tok =
        LoadHfTokenizerJson(TokenizerJsonFromGguf(name, pre), name + " tokenizer.json");
    const std::vector<std::string> inputs = VectorInputs(name);
    const std::vector<std::vector<int>> expected = VectorOutputs(name);
    int passed = 0;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const std::vector<int> ids = tok->Encode(inputs[i], false);
      EXPECT_EQ(ids, expected[i]) << name << " string " << i << ": got" << Ids(ids);
      passed += ids == expected[i];
    }
    EXPECT_EQ(passed, 46) << name;
  }
}

}  // namespace
}  // namespace posenc
