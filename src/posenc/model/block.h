// The inference decoder blocks: every architecture's layers are DecoderLayerForward (model/decoder_layer.h) over
// the file's weights, with the parts its ModelConfig names (norm type and placement, q/k norms, biases, gated or
// plain feed-forward, parallel residual, absolute positions). Prefill, KV-cache decode and context-parallel
// forward differ only in the attention step they pass.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/position_map.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/model/config.h"
#include "posenc/model/weights.h"
#include "posenc/rope/cos_sin.h"

namespace posenc {

/// How RoPE enters one layer in a forward pass.
struct LayerRope {
  /// Row p rotates q and k at position p (attention_factor and any magnitude folded in); cos == nullptr: the
  /// layer has no RoPE (NoPE), q and k are used as projected.
  CosSinView table;
  /// Optional (dynamic scaling): query rows with their own key rotation (see pre_rotation.h); rows are
  /// positions, so positions must be 0, 1, ... in order.
  const PreRotationTables* pre_rotation = nullptr;
  float softmax_scale_multiplier = 1.0f;  // multiplies the score scale (DeepSeek yarn)
  /// Optional: a training-free position map (attention/position_map.h). The layer then attends through
  /// MappedCausalAttention, rotating q and k itself with inv_freq [table.half] and magnitude (cos and sin times
  /// it, attention_factor included); table is not used for the rotation.
  const PositionMap* position_map = nullptr;
  const float* inv_freq = nullptr;
  double magnitude = 1.0;
};

/// The positional inputs of one forward pass besides the position ids.
struct ForwardRope {
  std::vector<LayerRope> layers;  // [n_layers]
  /// Absolute positions (learned / sinusoidal tables) are read at position p / absolute_scale: 1 reads row p;
  /// s > 1 interpolates the table linearly between rows (position interpolation of a learned table).
  double absolute_scale = 1.0;
};

/// Per-thread activation buffers of a forward pass (llama2.c's RunState, for a whole window). They grow to the
/// largest call seen and are reused.
struct ForwardState {
  std::vector<float> x;       // [n_tokens, dim]: residual stream
  std::vector<float> xb;      // [n_tokens, dim]: normed input of a block part; the final hidden states after
  std::vector<float> xb2;     // [n_tokens, dim]: the second branch's input (parallel residual) / a part's output
  std::vector<float> q;       // [n_tokens, q_dim]: queries (rotated by the attention step)
  std::vector<float> k;       // [n_tokens, kv_dim]: keys
  std::vector<float> v;       // [n_tokens, kv_dim]
  std::vector<float> q_raw;   // [n_tokens, q_dim]: unrotated queries (pre-rotation only)
  std::vector<float> k_raw;   // [n_tokens, kv_dim]: unrotated keys (pre-rotation only)
  std::vector<float> att;     // [n_tokens, q_dim]: attention output before wo
  std::vector<float> hb;      // [n_tokens, hidden_dim]: act(gate) * up
  std::vector<float> hb2;     // [n_tokens, hidden_dim]: up
  std::vector<int64_t> positions;  // [n_tokens]: position id of each row
  AttentionScratch attention;
};

/// The attention step of layer `layer` over the n rows of `state`: reads state.q, state.k, state.v (projected,
/// biases added, q/k normed; not rotated) and writes state.att [n, q_dim].
using AttendFn = std::function<void(int64_t layer, ForwardState& state, int64_t n)>;

/// Every block over n = tokens.size() rows: x = token_embd[token] * embedding_scale (+ the absolute position
/// row at positions[t] / rope.absolute_scale), then per layer the block of ModelConfig's comment with `attend`
/// as its attention, then the final norm into state.xb [n, dim]. state.positions is set to `positions`.
///
/// Shapes:  tokens [n], positions [n] (any order; >= 0).
/// Errors:  RangeError if a token id is outside [0, vocab_size) (names index and id), positions.size() != n, a
///          position is negative, or an absolute position lies past the learned table (names the limit);
///          NumericError naming the layer, the position, the channel and the value if the residual stream
///          after a block part is NaN or infinite.
/// Source:  transformers' *DecoderLayer.forward of each family (model/arch/ names them); llama2.c run.c
///          `forward`; llama.cpp src/models/*.cpp graphs.
void RunDecoderBlocks(const ModelConfig& config, const TransformerWeights& weights, std::span<const int> tokens,
                      std::span<const int64_t> positions, double absolute_scale, ForwardState& state,
                      const AttendFn& attend);

/// out = Norm(x) for n rows of `width` under config.norm and norm_eps: RMSNorm w * x / sqrt(mean(x^2) + eps),
/// LayerNorm w * (x - mean) / sqrt(var + eps) + b (float32, in the order of transformers' LlamaRMSNorm /
/// torch.nn.LayerNorm). out may equal x.
void ApplyNorm(const ModelConfig& config, const NormWeights& weights, const float* x, int64_t n, int64_t width,
               float* out);

/// The score options of a layer: its window, the model's attn_logit_softcapping and query_pre_attn_scalar.
ScoreOptions LayerScoreOptions(const ModelConfig& config, int64_t layer);

/// Throws NumericError if rows [0, n) of a row-major [n, width] activation hold NaN or infinity, naming the
/// layer (-1: none), the position (positions[row], or pos0 + row when positions is null), the head and channel
/// (head_dim > 0) and the value.
void CheckActivation(const float* x, int64_t n, int64_t width, int64_t pos0, int64_t layer, int64_t n_layers,
                     const char* what, int64_t head_dim = 0, const int64_t* positions = nullptr);

}  // namespace posenc
