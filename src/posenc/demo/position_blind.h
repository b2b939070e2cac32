// `posenc demo position-blind`: without positions, attention cannot tell "the cat eats the fish" from "the
// fish eats the cat": its outputs are the same vectors, permuted. With sinusoidal, learned or RoPE positions
// they are not, and a causal mask alone already breaks the symmetry.
//
// The model part is the bundled llama2.c model's layer 0: token embeddings -> RMSNorm (rms_att_weight[0]) ->
// q, k, v = wq[0], wk[0], wv[0] times it -> attention (posenc CausalAttention; GQA; scale 1/sqrt(head_dim))
// -> wo[0]. Full (unmasked) attention is CausalAttention called once per query with that query placed after
// every key. RMSNorm and the small matrix-vector products are local helpers here (llama2.c `rmsnorm`,
// `matmul`): the model library keeps its own private.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/formats/llama2c.h"
#include "posenc/tokenizer/llama2c.h"

namespace posenc::demo {

/// Where positions enter the layer.
enum class PositionEncoding {
  kNone,        // token embeddings only
  kSinusoidal,  // + sinusoidal PE(t) (d_model = dim, base 10000, interleaved) added to the embeddings
  kLearned,     // + a learned table row t (GPT-2 init normal(0, 0.02), seed 1, never trained)
  kRope,        // q and k rotated by t (interleaved, rope_theta 10000: what the model was trained with)
};

/// "none", "sinusoidal", "learned" or "rope".
const char* PositionEncodingName(PositionEncoding encoding);

/// Layer-0 attention output of one token sequence at positions 0..n-1.
/// Shapes: tokens [n]; returns [n, dim], row t = wo (attention output of token t).
/// Errors: posenc::RangeError if a token id is outside [0, vocab_size); as CausalAttention.
std::vector<float> LayerZeroAttention(const Checkpoint& model, const std::vector<int>& tokens,
                                      PositionEncoding encoding, bool causal);

/// Bound on max |LayerZeroAttention(b)[j] - LayerZeroAttention(a)[perm j]| when b is a permutation of a and
/// the layer is permutation-equivariant (no positions, no mask), so that only the order in which keys are
/// summed differs, computed from the run on `tokens` (= a). Derivation: scores may differ by 2 eps_s with
/// eps_s = head_dim u max_ij sum_c |q_ic k_jc| / sqrt(head_dim); softmax weights by the exp kernel's 2 ulp
/// (4u) each way and the sums over n keys ((n-1) u, twice); so each attention output is within
/// e = (eps_s + (2n + 6) u) max|v| of exact; through wo (max row sum of |wo| = W1): W1 2e + 2 dim u W1 max|att|.
/// u = 2^-24. Errors: as LayerZeroAttention.
double LayerZeroPermutationBound(const Checkpoint& model, const std::vector<int>& tokens, PositionEncoding encoding,
                                 bool causal);

/// One way of running the layer on both sentences.
struct PositionBlindVariant {
  PositionEncoding encoding = PositionEncoding::kNone;
  bool causal = false;
  std::vector<double> token_diff;  // [n]: max_c |out_b[j, c] - out_a[permutation[j], c]|
  double max_diff = 0.0;           // max of token_diff
  double bound = 0.0;              // float32 rounding bound on max_diff if the outputs were a permutation
  bool permuted = false;           // max_diff <= bound: "the same vectors, permuted"
};

/// Everything `posenc demo position-blind` prints.
struct PositionBlindDemo {
  std::string sentence_a = "the cat eats the fish";
  std::string sentence_b = "the fish eats the cat";
  std::vector<int> tokens_a, tokens_b;          // [n] Llama2cTokenizer::Encode, no BOS / EOS
  std::vector<std::string> pieces_a, pieces_b;  // [n] the pieces' text
  std::vector<int64_t> permutation;             // [n]: tokens_b[j] == tokens_a[permutation[j]]
  int64_t dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  std::vector<PositionBlindVariant> variants;     // none/full, none/causal, sinusoidal, learned, rope (full),
                                                  // rope/causal (the model's own layer 0)
  int64_t shown_token_b = 0;                      // index in b of the token whose outputs are printed ("cat")
  std::vector<float> shown_none_a, shown_none_b;  // [4]: first channels of that token's output, no positions
  std::vector<float> shown_rope_a, shown_rope_b;  // [4]: the same with RoPE
};

/// Runs the demo on the model and tokenizer files.
/// Errors: posenc::ConfigError naming the path and its format if model_path is not a llama2.c checkpoint
///         (DetectModelFormat); posenc::IoError / ConfigError from LoadCheckpoint and Llama2cTokenizer::Load;
///         posenc::ConfigError if the two sentences do not tokenize to the same multiset of ids (then no
///         permutation exists).
PositionBlindDemo RunPositionBlindDemo(const std::string& model_path, const std::string& tokenizer_path);

/// The demo as terminal text.
std::string RenderPositionBlindDemo(const PositionBlindDemo& demo);

}  // namespace posenc::demo
