// The decoder layer's order of parts (model/decoder_layer.h) against each family's definition in transformers:
// LlamaDecoderLayer (pre-norms), Gemma2DecoderLayer (pre- and post-norms), Olmo2DecoderLayer (post-norms only,
// q/k norm over all heads), GPTNeoXLayer with use_parallel_residual; and the backward as the sequential forward
// reversed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/model/decoder_layer.h"

namespace posenc {
namespace {

// Records the parts in the order they are walked.
struct RecordingSteps {
  std::vector<std::string> parts;

  static std::string Name(Into into) {
    return into == Into::kResidual ? "x" : into == Into::kBranch ? "branch" : "branch+";
  }
  void AttentionInput(bool pre_norm) { parts.push_back(pre_norm ? "attn_norm" : "attn_input"); }
  void ProjectQkv() { parts.push_back("qkv"); }
  void NormQk(QkNorm norm) { parts.push_back(norm == QkNorm::kPerHead ? "qk_norm/head" : "qk_norm/all"); }
  void Attend() { parts.push_back("attend"); }
  void AttentionOutput(Into into) { parts.push_back("wo->" + Name(into)); }
  void FeedForwardInput(bool pre_norm) { parts.push_back(pre_norm ? "ffn_norm" : "ffn_input"); }
  void FeedForward(Into into) { parts.push_back("ffn->" + Name(into)); }
  void PostNorm(PostNormSite site) {
    parts.push_back(site == PostNormSite::kAttention ? "attn_post_norm" : "ffn_post_norm");
  }
  void AddBranch() { parts.push_back("x+=branch"); }
  void CheckResidual(const char*) { parts.push_back("check"); }
  void FeedForwardBackward() { parts.push_back("d ffn"); }
  void FeedForwardInputBackward() { parts.push_back("d ffn_norm"); }
  void AttentionOutputBackward() { parts.push_back("d wo"); }
  void AttendBackward() { parts.push_back("d attend"); }
  void NormQkBackward(QkNorm) { parts.push_back("d qk_norm"); }
  void ProjectQkvBackward() { parts.push_back("d qkv"); }
  void AttentionInputBackward() { parts.push_back("d attn_norm"); }
};

std::vector<std::string> Forward(const ModelConfig& c) {
  RecordingSteps s;
  DecoderLayerForward(c, s);
  return s.parts;
}

TEST(DecoderLayer, LlamaIsPreNormSequential) {
  ModelConfig c;  // the defaults are Llama's
  EXPECT_EQ(Forward(c), (std::vector<std::string>{"attn_norm", "qkv", "attend", "wo->x", "check", "ffn_norm",
                                                  "ffn->x", "check"}));
  c.qk_norm = QkNorm::kPerHead;  // Qwen3: per-head q/k RMSNorm between the projection and RoPE
  EXPECT_EQ(Forward(c), (std::vector<std::string>{"attn_norm", "qkv", "qk_norm/head", "attend", "wo->x", "check",
                                                  "ffn_norm", "ffn->x", "check"}));
}

TEST(DecoderLayer, Gemma2NormsEachBranchBeforeAndAfter) {
  ModelConfig c;
  c.attn_post_norm = true;
  c.ffn_post_norm = true;
  EXPECT_EQ(Forward(c), (std::vector<std::string>{"attn_norm", "qkv", "attend", "wo->branch", "attn_post_norm",
                                                  "x+=branch", "check", "ffn_norm", "ffn->branch", "ffn_post_norm",
                                                  "x+=branch", "check"}));
}

TEST(DecoderLayer, Olmo2NormsOnlyTheOutputs) {
  ModelConfig c;
  c.attn_pre_norm = false;
  c.ffn_pre_norm = false;
  c.attn_post_norm = true;
  c.ffn_post_norm = true;
  c.qk_norm = QkNorm::kWhole;
  EXPECT_EQ(Forward(c), (std::vector<std::string>{"attn_input", "qkv", "qk_norm/all", "attend", "wo->branch",
                                                  "attn_post_norm", "x+=branch", "check", "ffn_input",
                                                  "ffn->branch", "ffn_post_norm", "x+=branch", "check"}));
}

TEST(DecoderLayer, GptNeoXParallelResidualReadsTheLayerInputTwice) {
  ModelConfig c;
  c.parallel_residual = true;
  // Both norms read x before the layer adds anything to it; the residual is written once, at the end.
  EXPECT_EQ(Forward(c), (std::vector<std::string>{"attn_norm", "qkv", "attend", "ffn_norm", "ffn->branch",
                                                  "wo->branch+", "x+=branch", "check"}));
}

TEST(DecoderLayer, BackwardIsTheSequentialForwardReversed) {
  ModelConfig c;
  c.qk_norm = QkNorm::kPerHead;
  RecordingSteps s;
  DecoderLayerBackward(c, s);
  EXPECT_EQ(s.parts, (std::vector<std::string>{"d ffn", "d ffn_norm", "d wo", "d attend", "d qk_norm", "d qkv",
                                               "d attn_norm"}));
}

TEST(DecoderLayer, BackwardRefusesLayersItHasNoGradientFor) {
  ModelConfig parallel;
  parallel.architecture = "gptneox";
  parallel.parallel_residual = true;
  RecordingSteps s;
  try {
    DecoderLayerBackward(parallel, s);
    FAIL() << "a parallel residual has no backward here";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("gptneox model has a parallel residual"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(s.parts.empty());  // refused before any part
  ModelConfig post;
  post.ffn_post_norm = true;
  EXPECT_THROW(DecoderLayerBackward(post, s), ConfigError);
}

}  // namespace
}  // namespace posenc
