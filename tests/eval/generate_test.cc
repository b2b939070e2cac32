// `posenc generate`: the two samples published with the model (karpathy/llama2.c doc/stories260K.md, also
// DOC_SAMPLES in shared/tools/ref_llama2c.py) are reproduced word for word through the KV cache.
#include <gtest/gtest.h>

#include <string>

#include "model/model_test_util.h"
#include "posenc/core/errors.h"
#include "posenc/eval/generate.h"

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
  for (EvalMethod m : {EvalMethod::kDynamic, EvalMethod::kDynamicHf, EvalMethod::kYarn}) {
    GenerateOptions l = Options(0.0f, 0.9f, 42);
    l.steps = 700;
    l.method = m;
    const GenerateResult long_run = Generate(l);
    EXPECT_EQ(long_run.cache_mode, m == EvalMethod::kDynamic ? KvCacheMode::kUnrotated : KvCacheMode::kRotated);
    EXPECT_GT(long_run.tokens.size(), 1u);
    if (m != EvalMethod::kYarn) {
      // Dynamic scaling changes nothing before position L0 = 512: the first 256 tokens are the greedy sample.
      EXPECT_EQ(long_run.text.substr(0, std::string(kGreedy).size()), kGreedy) << EvalMethodName(m);
    }
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
