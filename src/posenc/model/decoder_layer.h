// The structure of one decoder layer, written once: the order of its parts and the branches ModelConfig names
// (norm placement, q/k norms, parallel residual, post-norms). Every forward walks it: prefill, KV-cache decode and
// the context-parallel ring (RunDecoderBlocks, model/block.cc: float32 over the file's weights) and training
// (TrainModel, train/train_model.cc: flat float or float64 buffers that keep what the backward needs); training's
// backward walks the same parts in reverse beside it (llm.c style). The weights, the buffers and the arithmetic
// of each part belong to the Steps type that walks it; the order and the branches belong here.
//
// A Steps type provides, for the layer it is on (h: the part's input, x: the residual stream, branch: a block
// part's output before it is added to x):
//   AttentionInput(bool pre_norm)   h = pre_norm ? Norm_attn(x) : x
//   ProjectQkv()                    q, k, v = h [wq|wk|wv]^T (+ biases)
//   NormQk(QkNorm)                  q and k normed per head (Qwen3, Gemma 3) or over all heads (OLMo 2)
//   Attend()                        att = causal attention of q, k, v at the layer's positions
//   AttentionOutput(Into)           att wo^T (+ bo), into x, into a new branch, or added to the branch
//   FeedForwardInput(bool pre_norm) h = pre_norm ? Norm_ffn(x) : x
//   FeedForward(Into)               down(act(gate h) * up h) (+ biases), into x, a new branch or added to it
//   PostNorm(PostNormSite)          branch = Norm(branch) (Gemma 2/3, OLMo 2)
//   AddBranch()                     x += branch
//   CheckResidual(const char* what) x finite (names what it follows)
// and for the backward, with d_x the gradient of the residual stream (of the layer's output on entry, of its
// input on return):
//   FeedForwardBackward()           d_h from d_x through down, act and gate/up; weight gradients +=
//   FeedForwardInputBackward()      d_x += d_h through Norm_ffn
//   AttentionOutputBackward()       d_att from d_x through wo
//   AttendBackward()                d_q, d_k, d_v from d_att
//   NormQkBackward(QkNorm)          d_q, d_k through the per-head norms
//   ProjectQkvBackward()            d_h from d_q, d_k, d_v through [wq|wk|wv]
//   AttentionInputBackward()        d_x += d_h through Norm_attn
//
// Source: transformers' *DecoderLayer.forward of each family (model/arch/ names them); llama2.c run.c `forward`;
// llama.cpp src/models/*.cpp; llm.c train_gpt2.c (forward beside backward).
#pragma once

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/config.h"

namespace posenc {

/// Where a block part's output goes.
enum class Into {
  kResidual,   // added to the residual stream: x += out
  kBranch,     // written as the branch (branch = out), which a post-norm or AddBranch then takes
  kAddBranch,  // added to the branch (branch += out): the second half of a parallel residual
};

/// Which post-norm PostNorm applies.
enum class PostNormSite { kAttention, kFeedForward };

/// One decoder layer's forward in the order of the layer's family (see the file comment for the steps).
template <class Steps>
void DecoderLayerForward(const ModelConfig& c, Steps& s) {
  s.AttentionInput(c.attn_pre_norm);
  s.ProjectQkv();
  if (c.qk_norm != QkNorm::kNone) s.NormQk(c.qk_norm);
  s.Attend();
  if (c.parallel_residual) {
    // x + ffn(Norm2 x) + attn(Norm1 x): both branches read the layer's input (GPTNeoXLayer, llama.cpp gptneox).
    s.FeedForwardInput(c.ffn_pre_norm);
    s.FeedForward(Into::kBranch);
    s.AttentionOutput(Into::kAddBranch);
    s.AddBranch();
    s.CheckResidual("residual stream after the block");
    return;
  }
  if (c.attn_post_norm) {
    s.AttentionOutput(Into::kBranch);
    s.PostNorm(PostNormSite::kAttention);
    s.AddBranch();
  } else {
    s.AttentionOutput(Into::kResidual);
  }
  s.CheckResidual("residual stream after the attention block");
  s.FeedForwardInput(c.ffn_pre_norm);
  if (c.ffn_post_norm) {
    s.FeedForward(Into::kBranch);
    s.PostNorm(PostNormSite::kFeedForward);
    s.AddBranch();
  } else {
    s.FeedForward(Into::kResidual);
  }
  s.CheckResidual("residual stream after the feed-forward block");
}

/// The backward of DecoderLayerForward for sequential pre-norm layers (attention, then feed-forward, each
/// normed before and added to the residual stream as it is): the parts in reverse.
/// Errors: ConfigError naming the part if the layer has a parallel residual, a post-norm or no pre-norm (layers
/// without a backward here; CheckTrainable refuses such models before any training).
template <class Steps>
void DecoderLayerBackward(const ModelConfig& c, Steps& s) {
  if (c.parallel_residual || c.attn_post_norm || c.ffn_post_norm || !c.attn_pre_norm || !c.ffn_pre_norm) {
    throw ConfigError(fmt::format("the decoder layer's backward is written for sequential pre-norm layers; this {} "
                                  "model has {}", c.architecture,
                                  c.parallel_residual ? "a parallel residual" : "other norm placements"));
  }
  s.FeedForwardBackward();
  s.FeedForwardInputBackward();
  s.AttentionOutputBackward();
  s.AttendBackward();
  if (c.qk_norm != QkNorm::kNone) s.NormQkBackward(c.qk_norm);
  s.ProjectQkvBackward();
  s.AttentionInputBackward();
}

}  // namespace posenc
