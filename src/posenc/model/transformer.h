// The one Llama-family transformer (Llama 1/2/3, Mistral, TinyLlama, SmolLM, Qwen2, llama2.c): a window forward
// pass (prefill, for eval) and a KV-cache decode step (for generate), built from any model file posenc reads.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/kv_cache.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/dist/communicator.h"
#include "posenc/formats/model_file.h"
#include "posenc/model/config.h"
#include "posenc/model/weights.h"
#include "posenc/rope/cos_sin.h"

namespace posenc {

/// How RoPE enters one window forward pass over in-window positions [0, n_tokens).
struct ForwardRope {
  CosSinView table;  // [>= n_tokens, half]: row t rotates q_t and k_t (attention_factor folded in, if any)
  const PreRotationTables* pre_rotation = nullptr;  // optional: query rows with their own key rotation
                                                    // (rows it marks shared use `table`; see pre_rotation.h)
  float softmax_scale_multiplier = 1.0f;            // multiplies 1/sqrt(head_dim) in every attention score
};

/// Per-thread activation buffers of a forward pass (llama2.c's RunState, for a whole window). They grow to
/// the largest window seen and are reused.
struct ForwardState {
  std::vector<float> x;       // [n_tokens, dim]: residual stream
  std::vector<float> xb;      // [n_tokens, dim]: normed input of a block
  std::vector<float> q;       // [n_tokens, q_dim]: queries (rotated)
  std::vector<float> k;       // [n_tokens, kv_dim]: keys (rotated)
  std::vector<float> v;       // [n_tokens, kv_dim]
  std::vector<float> q_raw;   // [n_tokens, q_dim]: unrotated queries (pre-rotation only)
  std::vector<float> k_raw;   // [n_tokens, kv_dim]: unrotated keys (pre-rotation only)
  std::vector<float> att;     // [n_tokens, q_dim]: attention output before wo
  std::vector<float> hb;      // [n_tokens, hidden_dim]: silu(w1 x) * (w3 x)
  std::vector<float> hb2;     // [n_tokens, hidden_dim]: w3 x
  std::vector<int64_t> rows;  // [n_tokens]: positions of the rows (0..n_tokens-1; a rank's own positions in
                              // context-parallel forward)
  AttentionScratch attention;
};

/// The weights of one transformer block.
struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  WeightMatrix wq;               // [q_dim, dim]; rows in the config's rope_layout pair order
  WeightMatrix wk;               // [kv_dim, dim]
  WeightMatrix wv;               // [kv_dim, dim]
  WeightMatrix wo;               // [dim, q_dim]
  std::vector<float> bq;         // [q_dim] or empty (no bias)
  std::vector<float> bk;         // [kv_dim] or empty
  std::vector<float> bv;         // [kv_dim] or empty
  std::vector<float> bo;         // [dim] or empty
  std::vector<float> ffn_norm;   // [dim]
  WeightMatrix w1;               // gate [hidden_dim, dim]
  WeightMatrix w2;               // down [dim, hidden_dim]
  WeightMatrix w3;               // up [hidden_dim, dim]
};

/// Every weight of the model.
struct TransformerWeights {
  WeightMatrix token_embd;           // [vocab_size, dim]: rows gathered per token; the classifier when tied
  std::vector<float> output_norm;    // [dim]
  WeightMatrix output;               // [vocab_size, dim]: the classifier; empty (rows = 0) when tied
  std::vector<LayerWeights> layers;  // [n_layers]
};

/// A Llama-family model ready to run: pre-RMSNorm blocks of GQA attention with RoPE (q, k only; layout and
/// rotary_dim from the file) and a SwiGLU MLP, optional q/k/v/o biases, tied or separate classifier.
class Transformer {
 public:
  /// Builds the model from a loaded file (LoadModelFile): F32 tensors are used in place from the file's mapping
  /// (which this object keeps), other matrices converted to float32 once or kept encoded (`storage`), vectors
  /// (norms, biases) converted; every weight is checked finite.
  /// Errors:  IoError naming the file, the tensor, the element [row, column] and the value if a weight is NaN
  ///          or infinite (a NaN weight would otherwise become a plausible perplexity).
  /// `storage` says whether non-F32 matrices are converted at load or kept encoded (see WeightStorage); encoded
  /// matrices are checked finite row by row at load all the same. `compute` is the arithmetic of the prefill
  /// products (ComputePath; kBf16 also packs a bfloat16 copy of every matrix multiplied, see MakeWeightMatrix).
  /// Errors also: ConfigError from ResolveComputePath (bf16 on a CPU without oneDNN's bf16 matmul).
  explicit Transformer(const ModelFile& file, WeightStorage storage = WeightStorage::kAuto,
                       ComputePath compute = ComputePath::kF32);

  /// LoadModelFile(path), then the constructor. `path`: a .gguf file, a Hugging Face checkpoint folder or a
  /// llama2.c .bin. Errors: as LoadModelFile and the constructor.
  static Transformer Load(const std::string& path, WeightStorage storage = WeightStorage::kAuto,
                          ComputePath compute = ComputePath::kF32);

  const LlamaConfig& config() const { return config_; }
  const TransformerWeights& weights() const { return weights_; }
  /// What the load message shows (format, dims, tensor types, L0, RoPE).
  const ModelFileSummary& summary() const { return summary_; }
  /// Overrides the training length L0 (a file whose metadata is wrong). Errors: ConfigError if l0 < 1.
  void SetTrainCtx(int64_t l0);

  /// Causal forward pass of one window: token t sits at position t (positions restart at 0 for every call).
  /// Per layer: xb = RMSNorm(x) (eps rms_norm_eps); q, k, v = W xb (+ bias); RoPE on q and k (row t of
  /// rope.table, or the pre-rotation rows; config().rope_layout pairs); x += wo * attention (+ bias);
  /// xb = RMSNorm(x); x += w2 (silu(w1 xb) * w3 xb). Then logits = classifier * RMSNorm(x) for rows
  /// [logits_from, n_tokens) only (the positions a caller scores). Products go through Linear().
  ///
  /// Shapes:  tokens [n_tokens]; logits [n_tokens - logits_from, vocab_size], row-major, overwritten.
  /// Errors:  RangeError if a token id is outside [0, vocab_size) (names index and id), logits_from is outside
  ///          [0, n_tokens], or rope.table has fewer than n_tokens rows; ShapeError if 2 * rope.table.half >
  ///          head_dim or the pre-rotation tables' half differs from the table's.
  ///          NumericError naming the layer, the position, the head and channel, and the value if a query, key
  ///          or value (after RoPE), the residual stream after a block, or a logit is NaN or infinite.
  /// Source:  llama2.c run.c `forward` (one position at a time there; here all positions of the window);
  ///          transformers LlamaForCausalLM / Qwen2ForCausalLM forward.
  void Forward(std::span<const int> tokens, const ForwardRope& rope, ForwardState& state, float* logits,
               int64_t logits_from = 0) const;

  /// Forward without the classifier: every block, then the output RMSNorm. Afterwards state.xb holds the
  /// window's final hidden states [n_tokens, dim] (row t = position t), ready for Logits() on any rows, so a
  /// caller can turn a few rows at a time into logits (a [rows, vocab_size] buffer instead of [n_tokens,
  /// vocab_size]). Errors: as Forward (without the logits check).
  void ForwardHidden(std::span<const int> tokens, const ForwardRope& rope, ForwardState& state) const;

  /// ForwardHidden of one window computed by the ranks of `comm` together (context parallelism): this rank
  /// runs embeddings, norms, projections and the MLP for its positions only (split.ranges[comm.rank()], in
  /// ascending order), and attention with RingCausalAttention, so K/V blocks travel around the ring and every
  /// query and key is rotated with its global position in the window (for pre-rotation rows, by the rank that
  /// owns the query: keys travel unrotated). Collective: every rank calls it with the same tokens, split and
  /// RoPE. Afterwards state.rows holds this rank's positions [n_local] and state.xb their final hidden states
  /// [n_local, dim] (row i = position state.rows[i]), ready for Logits().
  ///
  /// Equals ForwardHidden within float32 rounding (attention merges the blocks in ring order: the bound of
  /// RingCausalAttention); the same on every transport and timing (deterministic merge order).
  /// Shapes:  tokens [L] (the whole window, every rank); split of L positions over comm.size() ranks.
  /// Errors:  ShapeError if split.n_tokens != L or split.n_ranks() != comm.size(); as ForwardHidden, with the
  ///          global position in NumericError messages ("query before RoPE": the ring rotates); as
  ///          RingCausalAttention (DistError when a peer fails or times out).
  /// stats:   if set, the ring's counts and times summed over the layers.
  /// Source:  Liu et al. 2023, Ring Attention (Sec. 3); NVIDIA TransformerEngine context parallelism (zigzag).
  void ForwardHiddenContextParallel(std::span<const int> tokens, const ContextSplit& split, const ForwardRope& rope,
                                    ForwardState& state, Communicator& comm, RingScratch& ring,
                                    RingStats* stats = nullptr) const;

  /// logits = classifier * hidden for n rows (through Linear: one sgemm).
  /// Shapes:  hidden [n, dim] (row stride dim); logits [n, vocab_size], overwritten.
  /// Errors:  NumericError naming the position pos0 + t, the channel and the value if a logit is not finite.
  void Logits(const float* hidden, int64_t n, int64_t pos0, float* logits) const;

  /// One decode step: `token` at position pos = cache.length() (the next position), written into the cache
  /// in every layer, then attention over cached positions [0, pos].
  /// q and the new k are rotated with row pos of `table`; a kRotated cache stores that rotated key, a
  /// kUnrotated cache stores the raw key and rotates all keys with rows [0, pos] of `table` at use. So
  /// `table` is the frequency table current at this step: the same every step for static scalings, the one
  /// for length pos + 1 for dynamic NTK.
  ///
  /// Shapes:  table [>= pos + 1, half]; logits [vocab_size], overwritten.
  /// Errors:  RangeError if token is outside [0, vocab_size), pos >= cache.max_seq_len() or the table lacks
  ///          row pos; ShapeError if the cache's layers / kv heads / head_dim differ from the model's.
  ///          NumericError as Forward (position = pos).
  /// Threads: the matrix-vector products are too small for BLAS threads to pay off; callers decoding in a
  ///          loop should SetBlasThreads(1) first (Generate does), else OpenBLAS may thread and spin-wait.
  /// Source:  llama2.c run.c `forward` + `generate`.
  void DecodeStep(int token, const CosSinView& table, float softmax_scale_multiplier, KvCache& cache,
                  ForwardState& state, float* logits) const;

 private:
  const WeightMatrix& classifier() const;
  // Every block over n = tokens.size() rows at positions state.rows [n] (set by the caller; used in messages):
  // embeddings, then per layer norm, q/k/v projections (+ bias), attend(layer) (reads state.q, k, v unrotated,
  // writes state.att), wo, the MLP; then the output norm into state.xb.
  void RunBlocks(std::span<const int> tokens, ForwardState& state,
                 const std::function<void(int64_t layer)>& attend) const;

  LlamaConfig config_;
  TransformerWeights weights_;
  ModelFileSummary summary_;
  std::vector<std::shared_ptr<const MappedFile>> files_;  // keeps in-place F32 weights mapped
};

}  // namespace posenc
