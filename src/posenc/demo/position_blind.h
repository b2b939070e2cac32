// `posenc demo position-blind`: without positions, attention cannot tell "the cat eats the fish" from "the
// fish eats the cat": its outputs are the same vectors, permuted. With sinusoidal, learned or RoPE positions
// they are not, and a causal mask alone already breaks the symmetry.
//
// The model part is layer 0 of the bundled model, or of any model file posenc reads (GGUF, Hugging Face
// folder, llama2.c): the model's own decoder block (RunDecoderBlocks over that one layer: embedding and its
// scale, the pre-attention norm, q/k/v with their biases and q/k norms), whose attention step is replaced by
// the variant's (RoPE or none on q and k, then posenc CausalAttention with the model's query scale and
// soft-cap; GQA), then wo (+ its bias). Full (unmasked) attention is CausalAttention called once per query with
// that query placed after every key. The model's own absolute position table (GPT-2) is left out: each variant
// says where positions enter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "posenc/model/transformer.h"

namespace posenc::demo {

/// Where positions enter the layer.
enum class PositionEncoding {
  kNone,        // token embeddings only
  kSinusoidal,  // + sinusoidal PE(t) (d_model = dim, base 10000, interleaved) added to the embeddings
  kLearned,     // + a learned table row t (GPT-2 init normal(0, 0.02), seed 1, never trained)
  kRope,        // q and k rotated by t: layer 0's RoPE as the file states it (inv_freq, rotary_dim, the pair
                // layout of the q/k rows); rope_theta 10000 over head_dim when layer 0 has none (GPT-2, NoPE)
};

/// "none", "sinusoidal", "learned" or "rope".
const char* PositionEncodingName(PositionEncoding encoding);

/// Layer-0 attention output of one token sequence at positions 0..n-1.
/// Shapes: tokens [n]; returns [n, dim], row t = wo (attention output of token t) (+ the output bias).
/// Errors: posenc::RangeError if a token id is outside [0, vocab_size); as RunDecoderBlocks and CausalAttention.
std::vector<float> LayerZeroAttention(const Transformer& model, const std::vector<int>& tokens,
                                      PositionEncoding encoding, bool causal);

/// Bound on max |LayerZeroAttention(b)[j] - LayerZeroAttention(a)[perm j]| when b is a permutation of a and
/// the layer is permutation-equivariant (no positions, no mask), so that only the order in which keys are
/// summed differs, computed from the run on `tokens` (= a). Derivation: scores may differ by 2 eps_s with
/// eps_s = head_dim u max_ij sum_c |q_ic k_jc| / sqrt(head_dim); softmax weights by the exp kernel's 2 ulp
/// (4u) each way and the sums over n keys ((n-1) u, twice); so each attention output is within
/// e = (eps_s + (2n + 6) u) max|v| of exact; through wo (max row sum of |wo| = W1): W1 2e + 2 q_dim u W1 max|att|.
/// The score scale is the model's (1/sqrt(head_dim), or query_pre_attn_scalar^-1/2); a soft-cap c tanh(s / c)
/// does not widen score differences (its slope is <= 1) and adds its own rounding, 4 u c, to eps_s.
/// u = 2^-24. Errors: as LayerZeroAttention.
double LayerZeroPermutationBound(const Transformer& model, const std::vector<int>& tokens, PositionEncoding encoding,
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
  std::string model_name;                       // the file or folder name (ModelName)
  std::string architecture;                     // ModelConfig::architecture ("llama", "qwen2", ...)
  std::string norm;                             // "RMSNorm" or "LayerNorm"
  std::string model_positions;                  // the model's absolute positions left out ("learned"), or empty
  std::string rope;                             // what the rope variants apply ("interleaved pairs, rope_theta
                                                // 10000"), and whether it is layer 0's own
  std::vector<int> tokens_a, tokens_b;          // [n] the model's tokenizer (Tokenizer::Encode), no BOS / EOS
  std::vector<std::string> pieces_a, pieces_b;  // [n] the pieces' text
  std::vector<int64_t> permutation;             // [n]: tokens_b[j] == tokens_a[permutation[j]]
  int64_t dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0;
  std::vector<PositionBlindVariant> variants;     // none/full, none/causal, sinusoidal, learned, rope (full),
                                                  // rope/causal (the model's own layer 0)
  int64_t shown_token_b = 0;                      // index in b of the token whose outputs are printed ("cat")
  std::vector<float> shown_none_a, shown_none_b;  // [4]: first channels of that token's output, no positions
  std::vector<float> shown_rope_a, shown_rope_b;  // [4]: the same with RoPE
};

/// Runs the demo on a model file (Transformer::Load: GGUF, Hugging Face folder or llama2.c) and its tokenizer
/// (LoadModelTokenizer: `tokenizer_path` if not empty, else the model's own).
/// Errors: as Transformer::Load and LoadModelTokenizer (naming the file); posenc::ConfigError if the two
///         sentences do not tokenize to the same multiset of ids (then no permutation exists).
PositionBlindDemo RunPositionBlindDemo(const std::string& model_path, const std::string& tokenizer_path);

/// The demo as terminal text.
std::string RenderPositionBlindDemo(const PositionBlindDemo& demo);

}  // namespace posenc::demo
