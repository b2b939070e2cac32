// The llama2.c transformer (Llama architecture): a window forward pass (prefill) and a KV-cache decode step.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "posenc/attention/attention.h"
#include "posenc/attention/kv_cache.h"
#include "posenc/attention/pre_rotation.h"
#include "posenc/formats/llama2c.h"
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
  std::vector<float> q;       // [n_tokens, dim]: queries (rotated)
  std::vector<float> k;       // [n_tokens, kv_dim]: keys (rotated)
  std::vector<float> v;       // [n_tokens, kv_dim]
  std::vector<float> q_raw;   // [n_tokens, dim]: unrotated queries (pre-rotation only)
  std::vector<float> k_raw;   // [n_tokens, kv_dim]: unrotated keys (pre-rotation only)
  std::vector<float> att;     // [n_tokens, dim]: attention output before wo
  std::vector<float> hb;      // [n_tokens, hidden_dim]: silu(w1 x) * (w3 x)
  std::vector<float> hb2;     // [n_tokens, hidden_dim]: w3 x
  std::vector<int64_t> rows;  // [n_tokens]: cos/sin rows 0..n_tokens-1
  AttentionScratch attention;
};

/// A llama2.c model ready to run. RoPE layout is interleaved (pairs 2i, 2i+1), applied to q and k only.
class Transformer {
 public:
  /// Takes ownership of a loaded checkpoint (see LoadCheckpoint).
  explicit Transformer(Checkpoint checkpoint);

  const ModelConfig& config() const { return checkpoint_.config; }
  const ModelWeights& weights() const { return checkpoint_.weights; }

  /// Causal forward pass of one window: token t sits at position t (positions restart at 0 for every call).
  /// Per layer: xb = RMSNorm(x) (eps 1e-5); q, k, v = W xb; RoPE on q and k (row t of rope.table, or the
  /// pre-rotation rows); x += wo * attention; xb = RMSNorm(x); x += w2 (silu(w1 xb) * w3 xb). Then
  /// logits = classifier * RMSNorm(x). Matrix products go through OpenBLAS (blas/gemm.h).
  ///
  /// Shapes:  tokens [n_tokens]; logits [n_tokens, vocab_size], row-major, overwritten.
  /// Errors:  RangeError if a token id is outside [0, vocab_size) (names index and id) or rope.table has
  ///          fewer than n_tokens rows; ShapeError if 2 * rope.table.half > head_dim or the pre-rotation
  ///          tables' half differs from the table's.
  ///          NumericError naming the layer, the position, the head and channel, and the value if a query, key
  ///          or value (after RoPE), the residual stream after a block, or a logit is NaN or infinite: checked
  ///          where it is cheap (one pass over each [n_tokens, width] activation, beside the matrix products
  ///          that made it), and before the softmax, where a NaN score would otherwise become uniform weights.
  /// Source:  llama2.c run.c `forward` (one position at a time there; here all positions of the window).
  void Forward(std::span<const int> tokens, const ForwardRope& rope, ForwardState& state, float* logits) const;

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
  Checkpoint checkpoint_;
};

}  // namespace posenc
