// The tensors of a model by their role in the block (what the architecture files fill in), and the source they
// are taken from: a GGUF file, a Hugging Face folder or a llama2.c checkpoint, with every name it hands out
// recorded, so that tensors the model does not use are found.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/formats/tensor_view.h"

namespace posenc {

/// A norm's weights: RMSNorm w, or LayerNorm w and b.
struct NormTensors {
  TensorView weight;                // [width]
  std::optional<TensorView> bias;   // [width]: LayerNorm only
  /// Hugging Face Gemma norms multiply by (1 + w) (Gemma2RMSNorm); the loader adds 1 to the weights, so the
  /// block always multiplies by its weights (llama.cpp's converter bakes the 1 into Gemma GGUF files).
  bool plus_one = false;
};

/// The tensors of one block. Matrices are row-major [out, in] (TensorView). Optional ones are present exactly
/// when the ModelConfig says the block has that part.
struct LayerTensors {
  std::optional<NormTensors> attn_norm;       // [dim]: attn_pre_norm
  TensorView wq;                              // [n_heads * head_dim, dim]; rows in the config's rope_layout order
  TensorView wk;                              // [n_kv_heads * head_dim, dim]; same row order as wq
  TensorView wv;                              // [n_kv_heads * head_dim, dim]
  std::optional<TensorView> bq, bk, bv;       // [q_dim], [kv_dim], [kv_dim]: attn_qkv_bias
  std::optional<NormTensors> q_norm, k_norm;  // [head_dim] (per head) or [q_dim] / [kv_dim] (whole): qk_norm
  TensorView wo;                              // [dim, n_heads * head_dim]
  std::optional<TensorView> bo;               // [dim]: attn_output_bias
  std::optional<NormTensors> attn_post_norm;  // [dim]: attn_post_norm
  std::optional<NormTensors> ffn_norm;        // [dim]: ffn_pre_norm (parallel residual: the second pre-norm)
  std::optional<TensorView> w_gate;           // [hidden_dim, dim]: gated_ffn
  TensorView w_up;                            // [hidden_dim, dim]
  std::optional<TensorView> b_up;             // [hidden_dim]: ffn_bias (the gate never has one here)
  TensorView w_down;                          // [dim, hidden_dim]
  std::optional<TensorView> b_down;           // [dim]: ffn_bias
  std::optional<NormTensors> ffn_post_norm;   // [dim]: ffn_post_norm
};

/// Every tensor the model uses.
struct ModelTensors {
  TensorView token_embd;                    // [vocab_size, dim]
  std::optional<TensorView> position_embd;  // [n_positions, dim]: learned absolute positions
  NormTensors output_norm;                  // [dim]
  std::optional<TensorView> output;         // [vocab_size, dim]; absent when tied_embeddings
  std::vector<LayerTensors> layers;         // [n_layers]
  /// Other tensors the positional configuration was read from (GGUF rope_freqs, rope_factors_long/short).
  std::vector<std::string> also_used;

  /// The classifier [vocab_size, dim]: `output`, or the token embedding when tied.
  const TensorView& classifier() const { return output ? *output : token_embd; }
  /// Calls f on every view above (norm biases included).
  void ForEach(const std::function<void(const TensorView&)>& f) const;
};

/// Named tensors of one file, handed out by name; remembers which names were taken.
class TensorSource {
 public:
  /// `source` prefixes errors (the file or folder); `find` returns the tensor of a name or nothing.
  TensorSource(std::string source, std::function<std::optional<TensorView>(std::string_view)> find,
               std::vector<std::string> all_names);

  /// The tensor of that name. Errors: ConfigError "<source>: required tensor 'name' is missing".
  TensorView Require(const std::string& name);
  /// The tensor of that name if the file has it.
  std::optional<TensorView> Optional(const std::string& name);
  bool Has(const std::string& name) const;
  /// Names of the file that were never taken, in the file's order.
  std::vector<std::string> Unused() const;
  /// Marks a name as taken without using it (e.g. buffers a format stores beside the weights).
  void MarkUsed(const std::string& name);
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::function<std::optional<TensorView>(std::string_view)> find_;
  std::vector<std::string> all_;
  std::set<std::string> used_;
};

/// Rows [begin, begin + count) of a matrix as a view of the same bytes (rows of every ggml type are
/// self-contained): how fused projections (qkv, gate_up) are split. `name` names the part in messages.
/// Errors: ConfigError naming the tensor if it is not 2-D or the range exceeds its rows.
TensorView SliceRows(const TensorView& t, int64_t begin, int64_t count, const std::string& name);

/// The elements [begin, begin + count) of a vector (a bias) as a view. Errors: ConfigError as SliceRows.
TensorView SliceVector(const TensorView& t, int64_t begin, int64_t count, const std::string& name);

/// A copy of the matrix with its rows in the order `rows` (row i of the result is row rows[i] of t), same
/// encoding: GPT-NeoX's per-head [q, k, v] rows put into [Q; K; V] blocks. Vectors (1-D) are gathered by element.
/// Errors: ConfigError if an index is outside [0, rows) or a 1-D tensor's type is not F32/F16/BF16.
TensorView GatherRows(const TensorView& t, const std::vector<int64_t>& rows, const std::string& name);

/// The transpose of a 2-D float tensor (F32, F16, BF16: the types a Hugging Face folder holds), same encoding:
/// GPT-2's Conv1D weights [in, out] turned into [out, in].
/// Errors: ConfigError naming the tensor for another type or rank.
TensorView Transpose(const TensorView& t);

}  // namespace posenc
