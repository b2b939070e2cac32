// `posenc generate`: the two samples published with the model (karpathy/llama2.c doc/stories260K.md, also
// DOC_SAMPLES in the numpy oracle) are reproduced word for word through the KV cache; the limits of sampling
// (tiny temperature, empty nucleus, seed 0) and of the run's size.
#include <gtest/gtest.h>

#include <string>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/model/generate.h"

namespace posenc {
namespace {

const char* kGreedy =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, "
    "she saw a big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, \"Lily, "
    "let's go to the park.\" Lily was sad and didn't know what to do. She said, \"I want to play with your "
    "ball, but I can't find it.\"\nLily was sad and didn't know what to do. She said, \"I'm sorry, Lily. I "
    "didn't know what to do.\"\nLily didn't want to help her mom, so she said, \"I'm sorry, mom. I didn't "
    "know what to do.\" Her mom said, \"Don't worry, Lily. We can help you.";

const char* kTopP =
    "Once upon a time, there was a little boy named Timmy. Timmy loved to play with his toys and eat "
    "sandwiches. One day, Timmy's mom told him it was time to rest for a while. Timmy's friend Billy came "
    "over and took him a down.\nTimmy's mom saw that Timmy was sad, but Timmy said, \"I didn't understand "
    "what is it! We need to find some leafs.\" Timmy thought about it and took a deep breath on a spoon. He "
    "hoped it was important to be kind and continued to find its image next time.\nAfter they finished "
    "getting, Timmy's dad came up to his house and promised to help Timmy.";

GenerateOptions Options(float temperature, float topp, uint64_t seed) {
  GenerateOptions o;
  o.model_path = testing::ModelPath();
  o.tokenizer_path = testing::TokenizerPath();
  o.temperature = temperature;
  o.topp = topp;
  o.seed = seed;
  return o;
}

TEST(GenerateTest, GreedyReproducesTheDocumentedSample) {
  std::string streamed;
  const GenerateResult r = Generate(Options(0.0f, 0.9f, 42), [&](const std::string& p) { streamed += p; });
  EXPECT_EQ(r.text, kGreedy);
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.tokens.size(), 257u);  // BOS + 256 steps
}

TEST(GenerateTest, TopPSeed133742ReproducesTheDocumentedSample) {
  EXPECT_EQ(Generate(Options(1.0f, 0.9f, 133742)).text, kTopP);
}

TEST(GenerateTest, PromptIsContinuedAndScaledMethodsRunPastL0) {
  GenerateOptions o = Options(0.0f, 0.9f, 42);
  o.prompt = "Once upon a time, there was a little girl named Lily.";
  const GenerateResult r = Generate(o);
  EXPECT_EQ(r.text.rfind("Once upon a time, there was a little girl named Lily.", 0), 0u) << r.text;
  EXPECT_EQ(r.text, kGreedy);  // greedy from BOS passes through this prompt, so the continuation is the same
  for (RopeMethod m : {RopeMethod::kDynamic, RopeMethod::kDynamicHf, RopeMethod::kYarn}) {
    GenerateOptions l = Options(0.0f, 0.9f, 42);
    l.steps = 700;
    l.method = m;
    const GenerateResult long_run = Generate(l);
    EXPECT_EQ(long_run.cache_mode, m == RopeMethod::kDynamic ? KvCacheMode::kUnrotated : KvCacheMode::kRotated);
    EXPECT_GT(long_run.tokens.size(), 1u);
    if (m != RopeMethod::kYarn) {
      // Dynamic scaling changes nothing before position L0 = 512: the first 256 tokens are the greedy sample.
      EXPECT_EQ(long_run.text.substr(0, std::string(kGreedy).size()), kGreedy) << RopeMethodName(m);
    }
  }
}

// Temperature 1e-38 is the greedy limit: the published greedy story, with the multinomial and the nucleus path.
TEST(GenerateTest, TinyTemperatureGivesTheGreedyStory) {
  EXPECT_EQ(Generate(Options(1e-38f, 1.0f, 7)).text, kGreedy);
  EXPECT_EQ(Generate(Options(1e-38f, 0.9f, 7)).text, kGreedy);
}

// Temperature 1e6 flattens the distribution below top-p 0.001's cutoff: an empty nucleus, which crashed. The
// run completes, every token chosen as the most probable one.
TEST(GenerateTest, EmptyNucleusRunCompletes) {
  GenerateOptions o = Options(1e6f, 0.001f, 7);
  o.steps = 20;
  const GenerateResult r = Generate(o);
  EXPECT_EQ(r.n_sampled, static_cast<int64_t>(r.tokens.size()) - 1);
  EXPECT_GE(r.tokens.size(), 2u);
}

// Seed 0 froze xorshift (every draw 0): greedy text at topp 0.9, "<unk>" forever at topp 1. As llama2.c, 0 now
// means "from the clock"; the seed used is reported, and repeating it repeats the text.
TEST(GenerateTest, SeedZeroSeedsFromTheClock) {
  GenerateOptions o = Options(1.0f, 1.0f, 0);
  o.steps = 60;
  const GenerateResult r = Generate(o);
  EXPECT_NE(r.seed, 0u);
  EXPECT_EQ(r.text.find("<unk>"), std::string::npos) << r.text;
  GenerateOptions again = Options(1.0f, 1.0f, r.seed);
  again.steps = 60;
  EXPECT_EQ(Generate(again).text, r.text);
}

// A prompt longer than the run is cut; the result says by how much (the CLI prints it on stderr).
TEST(GenerateTest, PromptCutByStepsIsCounted) {
  GenerateOptions o = Options(0.0f, 0.9f, 42);
  o.prompt = "Once upon a time, there was a little girl named Lily.";
  o.steps = 5;
  const GenerateResult r = Generate(o);
  EXPECT_GT(r.prompt_tokens, 5);
  EXPECT_EQ(r.prompt_tokens_unused, r.prompt_tokens - 5);
  o.steps = 256;
  EXPECT_EQ(Generate(o).prompt_tokens_unused, 0);
}

// steps = 1e12 would need a KV cache of 1e12 x 2 x 5 layers x 32 floats (~1.3 PB): refused up front with the
// bytes, not std::bad_alloc after loading.
TEST(GenerateTest, StepsBeyondMemoryAreRefusedWithTheBytes) {
  GenerateOptions o = Options(0.0f, 0.9f, 42);
  o.steps = 1'000'000'000'000;
  try {
    Generate(o);
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("`steps`"), std::string::npos) << m;
    EXPECT_NE(m.find("would need"), std::string::npos) << m;
    EXPECT_NE(m.find("PiB"), std::string::npos) << m;
  }
}

TEST(GenerateTest, RejectsBadSettings) {
  GenerateOptions o = Options(0.0f, 0.9f, 42);
  o.steps = 0;
  EXPECT_THROW(Generate(o), ConfigError);
  EXPECT_THROW(Generate(Options(-1.0f, 0.9f, 42)), ConfigError);
}

}  // namespace
}  // namespace posenc
