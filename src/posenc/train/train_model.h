// A Llama-family decoder for training: forward and backward over [batch, ctx] token windows, parameters and
// gradients as flat float buffers with named views (parameters.h). Each layer is the inference model's decoder
// layer (DecoderLayerForward, model/decoder_layer.h; the backward DecoderLayerBackward beside it) walked over
// the layer pairs of posenc/model/layers (each a forward beside its backward, llm.c style).
//
// Legend: B batch (sequences), T ctx (tokens per sequence), N = B * T rows, C dim, F hidden_dim, V vocab_size,
// H n_heads, G n_kv_heads, D head_dim, Q = H D, K = G D, L n_layers.
//
// Per block l (pre-norm, as llama2.c run.c `forward` and HF `LlamaDecoderLayer`):
//   ln1 = RMSNorm(x) * attn_norm;  qkv = ln1 [wq|wk|wv]^T (+ [bq|bk|bv]);  with qk_norm (Qwen3) each head of q
//   and k RMSNorm-ed (weights attn_q_norm, attn_k_norm [D]);  att = causal GQA attention with RoPE;
//   x_mid = x + att wo^T;  ln2 = RMSNorm(x_mid) * ffn_norm;  [gate|up] = ln2 [w1|w3]^T;
//   x_next = x_mid + (silu(gate) * up) w2^T.
// Input x_0 = token_embd[token] (+ the sinusoidal or learned position row); output: loss = mean cross-entropy of
// RMSNorm(x_L) * output_norm projected by output (token_embd when tied) against the targets.
//
// Rooms: the layers live in posenc/model/layers (each a forward beside its backward) because the inference model
// may call their forward halves; what only training needs (this model, the optimizer, the schedule, the trainer)
// lives here in posenc/train.
//
// Re-basing onto another weight struct: the layers take only pointers; a model that holds its weights
// elsewhere builds a ParameterLayout whose tensors carry the same GGUF names and copies (or views) its tensors
// into the flat buffer by name. The q/k/v and gate/up groups must stay contiguous (one product each).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "posenc/model/layers/self_attention.h"
#include "posenc/train/config.h"
#include "posenc/train/parameters.h"

namespace posenc {

/// One batch of training windows.
struct TokenBatch {
  std::span<const int32_t> inputs;   // [batch, ctx]: token ids in [0, vocab_size)
  std::span<const int32_t> targets;  // [batch, ctx]: the token each position must predict, or -1 (no loss)
  int64_t batch = 0;
  int64_t ctx = 0;
};

/// Saved activations of one forward pass (llm.c's ActivationTensors) and the backward's scratch. Sized by
/// TrainModel::Forward for its batch (grows, never shrinks).
template <typename T>
struct Activations {
  int64_t batch = 0;
  int64_t ctx = 0;
  std::vector<T> res;         // [L, N, C]: input of block l (the residual stream)
  std::vector<T> attn_rstd;   // [L, N]
  std::vector<T> ln1;         // [L, N, C]
  std::vector<T> qkv;         // [L, N, Q + 2K]: q | k | v, unrotated
  std::vector<T> qk_rot;      // [L, N, Q + K]: q | k as attention used them (rotated)
  std::vector<T> q_proj;      // [L, N, Q]: q before its per-head RMSNorm (qk_norm only; qkv then holds it normed)
  std::vector<T> k_proj;      // [L, N, K]: k before its per-head RMSNorm (qk_norm only)
  std::vector<T> q_rstd;      // [L, N * H] (qk_norm only)
  std::vector<T> k_rstd;      // [L, N * G] (qk_norm only)
  std::vector<T> att;         // [L, N, Q]: attention output
  std::vector<T> att_lse;     // [L, N, H]: base-2 softmax normalisers
  std::vector<T> res_mid;     // [L, N, C]: residual stream after the attention block
  std::vector<T> ffn_rstd;    // [L, N]
  std::vector<T> ln2;         // [L, N, C]
  std::vector<T> gate_up;     // [L, N, 2F]: gate | up
  std::vector<T> hb;          // [L, N, F]: silu(gate) * up
  std::vector<T> res_out;     // [N, C]: output of the last block
  std::vector<T> final_rstd;  // [N]
  std::vector<T> lnf;         // [N, C]
  std::vector<T> logits;      // [N, V]: logits after Forward, dlogits after Backward
  std::vector<T> lse;         // [N]: natural-log softmax normalisers of the logits
  // Backward scratch for one block at a time (reused across blocks).
  std::vector<T> d_res;       // [N, C]: gradient of the residual stream
  std::vector<T> d_ln;        // [N, C]
  std::vector<T> d_qkv;       // [N, Q + 2K]
  std::vector<T> d_att;       // [N, Q]
  std::vector<T> d_qk_in;     // [N, Q]: dL/d(normed q or k), gathered per head (qk_norm only)
  std::vector<T> d_qk_out;    // [N, Q]: dL/d(q or k before the norm) (qk_norm only)
  std::vector<T> d_gate_up;   // [N, 2F]
  std::vector<T> d_hb;        // [N, F]
  SelfAttentionWorkspace attention;
};

/// Where a non-finite value was found.
struct NonFiniteAt {
  int64_t layer = -1;   // block index, -1 outside the blocks
  std::string tensor;   // e.g. "blk.2.attn_q.weight" or "blk.2 attention output"
  int64_t index = 0;    // flat element index inside that tensor
  double value = 0;     // the value (NaN or +-infinity)
};

/// The training model. T = float (training) or double (gradient checks: the same code in float64).
template <typename T>
class TrainModel {
 public:
  /// Parameters and gradients zero-filled; a sinusoidal table is built for positions [0, n_positions).
  /// Errors: ConfigError from CheckTrainable.
  explicit TrainModel(const ModelConfig& config);
  /// The model of a training shape: ToModelConfig(shape, shape.max_seq_len). Errors: ConfigError from
  /// ValidateTrainShape, then as above.
  explicit TrainModel(const TrainShape& shape);

  const ModelConfig& config() const { return config_; }
  PositionEncoding position_encoding() const { return position_encoding_; }
  const ParameterLayout& layout() const { return layout_; }
  std::span<T> parameters() { return params_; }
  std::span<const T> parameters() const { return params_; }
  std::span<T> gradients() { return grads_; }
  std::span<const T> gradients() const { return grads_; }
  ParameterTensors<T> params() { return MakeParameterViews(config_, layout_, params_.data()); }
  ParameterTensors<T> grads() { return MakeParameterViews(config_, layout_, grads_.data()); }

  /// Initialises the parameters from `seed`: one std::mt19937_64(seed) stream (core/random.h FillNormal) walks
  /// the tensors in buffer order; matrices and embeddings get normal(0, 0.02), the residual projections
  /// (attn_output, ffn_down) normal(0, 0.02 / sqrt(2 n_layers)) (GPT-2), norms 1 and biases 0 (no draws). The
  /// values are float32 whatever T is, so a float and a float64 model from one seed hold the same weights.
  /// Source: GPT-2 / nanoGPT `_init_weights`.
  void InitParameters(uint64_t seed);

  /// Sets every gradient to 0 (before each step's backward; gradients accumulate).
  void ZeroGradients();

  /// Forward pass over a batch; returns the mean loss (nats per target, float64 accumulation) and saves what
  /// Backward needs in `acts`.
  ///
  /// Shapes:  batch.inputs, batch.targets [batch, ctx]; rope.table [>= ctx, R] when position_encoding is rope.
  /// Errors:  ShapeError if the spans do not hold batch * ctx ids or batch, ctx < 1; RangeError for a token or
  ///          target outside the vocabulary (naming the index), ctx > n_positions for learned / sinusoidal
  ///          positions, a RoPE table shorter than ctx, or no target at all; ConfigError if position_encoding
  ///          is rope and rope.table is empty, or it is not rope and a RoPE table is given; everything
  ///          ValidateSelfAttention throws.
  double Forward(const TokenBatch& batch, const AttentionRope& rope, Activations<T>& acts) const;

  /// Backward pass of the last Forward on `acts` (same batch and rope): gradients += dLoss/dparameters.
  /// The caller zeroes the gradients first (ZeroGradients). Errors: as Forward.
  void Backward(const TokenBatch& batch, const AttentionRope& rope, Activations<T>& acts);

  /// The first NaN or infinity among the parameters (buffer order), if any.
  std::optional<NonFiniteAt> FirstNonFiniteParameter() const;
  /// The first NaN or infinity among the gradients in backward order (classifier first, embeddings last), so
  /// the tensor named is the one nearest the loss, where it first appeared.
  std::optional<NonFiniteAt> FirstNonFiniteGradient() const;
  /// The first NaN or infinity among the saved activations of the last Forward, in forward order.
  std::optional<NonFiniteAt> FirstNonFiniteActivation(const Activations<T>& acts) const;

 private:
  ModelConfig config_;
  PositionEncoding position_encoding_;
  ParameterLayout layout_;
  std::vector<T> params_;
  std::vector<T> grads_;
  std::vector<T> sinusoidal_;  // [n_positions, C] for sinusoidal positions, else empty
};

}  // namespace posenc
