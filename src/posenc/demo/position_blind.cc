#include "posenc/demo/position_blind.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "posenc/attention/attention.h"
#include "posenc/core/errors.h"
#include "posenc/demo/common.h"
#include "posenc/kernels/rmsnorm_row.h"
#include "posenc/model/loader.h"
#include "posenc/pe/learned.h"
#include "posenc/pe/sinusoidal.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

namespace posenc::demo {
namespace {

constexpr float kRmsNormEps = 1e-5f;  // llama2.c run.c `rmsnorm`

// y[t] = W x[t] for W [rows, cols] row-major (llama2.c `matmul`, float32, channel order 0..cols-1).
void MatVecRows(const float* w, const float* x, int64_t n, int64_t rows, int64_t cols, float* y) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t c = 0; c < cols; ++c) acc += w[r * cols + c] * x[t * cols + c];
      y[t * rows + r] = acc;
    }
  }
}

// Everything one run of layer 0 computes, kept for the rounding bound.
struct LayerRun {
  std::vector<float> q, k, v;  // [n, dim], [n, kv_dim], [n, kv_dim] (q, k rotated for kRope)
  std::vector<float> att;      // [n, dim]: attention output before wo
  std::vector<float> out;      // [n, dim]: wo att
};

LayerRun RunLayer(const Checkpoint& model, const std::vector<int>& tokens, PositionEncoding encoding, bool causal) {
  const Llama2cHeader& cfg = model.config;
  const ModelWeights& w = model.weights;
  const int64_t n = static_cast<int64_t>(tokens.size()), dim = cfg.dim, kv_dim = cfg.kv_dim(), hd = cfg.head_dim();
  std::vector<float> x(static_cast<size_t>(n * dim));
  for (int64_t t = 0; t < n; ++t) {
    const int id = tokens[static_cast<size_t>(t)];
    if (id < 0 || id >= cfg.vocab_size) {
      throw RangeError(fmt::format("tokens[{}] = {} is outside the vocabulary [0, {})", t, id, cfg.vocab_size));
    }
    std::copy_n(w.token_embedding_table.begin() + id * dim, dim, x.begin() + t * dim);
  }
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = t;
  if (encoding == PositionEncoding::kSinusoidal) {
    SinusoidalParams sp;
    sp.d_model = dim;
    AddSinusoidal(sp, positions, x);
  } else if (encoding == PositionEncoding::kLearned) {
    LearnedPositionalEmbedding pe(cfg.seq_len, dim);
    InitLearnedPeNormal(pe, /*seed=*/1);
    LearnedPeForwardAdd(pe, positions, x);
  }
  std::vector<float> xb(x.size());
  kernels::RmsNormRows(x.data(), w.rms_att_weight.data(), n, dim, kRmsNormEps, xb.data());  // layer 0
  LayerRun run;
  run.q.resize(static_cast<size_t>(n * dim));
  run.k.resize(static_cast<size_t>(n * kv_dim));
  run.v.resize(static_cast<size_t>(n * kv_dim));
  MatVecRows(w.wq.data(), xb.data(), n, dim, dim, run.q.data());
  MatVecRows(w.wk.data(), xb.data(), n, kv_dim, dim, run.k.data());
  MatVecRows(w.wv.data(), xb.data(), n, kv_dim, dim, run.v.data());
  if (encoding == PositionEncoding::kRope) {
    RopeFrequencies f;
    f.inv_freq = DefaultInvFreq(10000.0, hd);
    const CosSinTable table = ComputeCosSin(f, positions);  // row t = position t
    ApplyRopeQK(HeadsView::Contiguous(run.q.data(), n, cfg.n_heads, hd),
                HeadsView::Contiguous(run.k.data(), n, cfg.n_kv_heads, hd), positions, View(table),
                RopeLayout::kInterleaved);
  }
  const AttentionDims dims{cfg.n_heads, cfg.n_kv_heads, hd};
  AttentionScratch scratch;
  run.att.assign(static_cast<size_t>(n * dim), 0.0f);
  if (causal) {
    const AttentionInputs in{run.q.data(), n, dim, 0, run.k.data(), run.v.data(), n, kv_dim};
    CausalAttention(dims, in, 1.0f, run.att.data(), dim, scratch);
  } else {
    // full attention: each query alone, placed at position n-1, sees every key
    for (int64_t t = 0; t < n; ++t) {
      const AttentionInputs in{run.q.data() + t * dim, 1, dim, n - 1, run.k.data(), run.v.data(), n, kv_dim};
      CausalAttention(dims, in, 1.0f, run.att.data() + t * dim, dim, scratch);
    }
  }
  run.out.resize(static_cast<size_t>(n * dim));
  MatVecRows(w.wo.data(), run.att.data(), n, dim, dim, run.out.data());
  return run;
}

// LayerZeroPermutationBound (derivation in the header).
double PermutationBound(const Checkpoint& model, const LayerRun& run) {
  const Llama2cHeader& cfg = model.config;
  const int64_t n = static_cast<int64_t>(run.q.size()) / cfg.dim, hd = cfg.head_dim(), dim = cfg.dim;
  const int64_t kv_mul = cfg.kv_mul(), kv_dim = cfg.kv_dim();
  double qk = 0.0;
  for (int64_t h = 0; h < cfg.n_heads; ++h) {
    const int64_t kvh = h / kv_mul;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t c = 0; c < hd; ++c) {
          s += std::fabs(run.q[static_cast<size_t>(i * dim + h * hd + c)]) *
               std::fabs(run.k[static_cast<size_t>(j * kv_dim + kvh * hd + c)]);
        }
        qk = std::max(qk, s);
      }
    }
  }
  const double u = kF32Roundoff;
  const double eps_s = static_cast<double>(hd) * u * qk / std::sqrt(static_cast<double>(hd));
  double vmax = 0.0, amax = 0.0, w1 = 0.0;
  for (float v : run.v) vmax = std::max(vmax, static_cast<double>(std::fabs(v)));
  for (float a : run.att) amax = std::max(amax, static_cast<double>(std::fabs(a)));
  for (int64_t r = 0; r < dim; ++r) {
    double s = 0.0;
    for (int64_t c = 0; c < dim; ++c) s += std::fabs(model.weights.wo[static_cast<size_t>(r * dim + c)]);
    w1 = std::max(w1, s);
  }
  const double e = (eps_s + (2.0 * static_cast<double>(n) + 6.0) * u) * vmax;
  return w1 * 2.0 * e + 2.0 * static_cast<double>(dim) * u * w1 * amax;
}

std::vector<std::string> Words(const std::string& sentence) {
  std::vector<std::string> words;
  std::string word;
  for (char c : sentence + " ") {
    if (c == ' ') {
      if (!word.empty()) words.push_back(word);
      word.clear();
    } else {
      word += c;
    }
  }
  return words;
}

std::string LastWord(const std::string& sentence) { return Words(sentence).back(); }

// tokens_b[j] == tokens_a[perm[j]]. When each sentence's ids are the concatenation of its words' ids (each word
// encoded alone, with the dummy-prefix space), words are matched to words (first unused equal word), so a
// piece shared by two words ("at" in "cat" and "eats") stays with its word; otherwise ids are matched one by
// one (first unused equal id). Errors: ConfigError if the id multisets differ.
std::vector<int64_t> WordPermutation(const Llama2cTokenizer& tok, const std::string& a, const std::string& b,
                                     const std::vector<int>& tokens_a, const std::vector<int>& tokens_b) {
  auto fail = [&] {
    return ConfigError(
        fmt::format("'{}' and '{}' do not tokenize to the same ids, so no permutation maps one "
                    "onto the other",
                    a, b));
  };
  if (tokens_a.size() != tokens_b.size()) throw fail();
  // word blocks: (first id index, ids)
  auto blocks = [&](const std::string& sentence, const std::vector<int>& ids) {
    std::vector<std::pair<int64_t, std::vector<int>>> out;
    std::vector<int> joined;
    for (const std::string& w : Words(sentence)) {
      std::vector<int> wi = tok.Encode(w, false, false);
      out.push_back({static_cast<int64_t>(joined.size()), wi});
      joined.insert(joined.end(), wi.begin(), wi.end());
    }
    if (joined != ids) out.clear();
    return out;
  };
  const auto wa = blocks(a, tokens_a), wb = blocks(b, tokens_b);
  std::vector<int64_t> perm;
  if (!wa.empty() && !wb.empty() && wa.size() == wb.size()) {
    std::vector<bool> used(wa.size(), false);
    for (const auto& [start_b, ids_b] : wb) {
      size_t found = wa.size();
      for (size_t i = 0; i < wa.size() && found == wa.size(); ++i) {
        if (!used[i] && wa[i].second == ids_b) found = i;
      }
      if (found == wa.size()) {
        perm.clear();
        break;
      }
      used[found] = true;
      for (size_t t = 0; t < ids_b.size(); ++t) perm.push_back(wa[found].first + static_cast<int64_t>(t));
    }
    if (perm.size() == tokens_b.size()) return perm;
  }
  perm.clear();
  std::vector<bool> used(tokens_a.size(), false);
  for (int id : tokens_b) {
    int64_t found = -1;
    for (size_t i = 0; i < tokens_a.size() && found < 0; ++i) {
      if (!used[i] && tokens_a[i] == id) found = static_cast<int64_t>(i);
    }
    if (found < 0) throw fail();
    used[static_cast<size_t>(found)] = true;
    perm.push_back(found);
  }
  return perm;
}

}  // namespace

const char* PositionEncodingName(PositionEncoding encoding) {
  switch (encoding) {
    case PositionEncoding::kNone:
      return "none";
    case PositionEncoding::kSinusoidal:
      return "sinusoidal";
    case PositionEncoding::kLearned:
      return "learned";
    case PositionEncoding::kRope:
      return "rope";
  }
  return "unknown";
}

std::vector<float> LayerZeroAttention(const Checkpoint& model, const std::vector<int>& tokens,
                                      PositionEncoding encoding, bool causal) {
  return RunLayer(model, tokens, encoding, causal).out;
}

double LayerZeroPermutationBound(const Checkpoint& model, const std::vector<int>& tokens, PositionEncoding encoding,
                                 bool causal) {
  return PermutationBound(model, RunLayer(model, tokens, encoding, causal));
}

PositionBlindDemo RunPositionBlindDemo(const std::string& model_path, const std::string& tokenizer_path) {
  if (const ModelFormat format = DetectModelFormat(model_path); format != ModelFormat::kLlama2c) {
    throw ConfigError(fmt::format("demo position-blind recomputes layer 0 of a llama2.c checkpoint in float32 (its "
                                  "RMSNorm, q/k/v and wo as llama2.c stores them); '{}' is a {} model: run the "
                                  "topic on the bundled model (no --model) or give a llama2.c .bin",
                                  model_path, ModelFormatName(format)));
  }
  PositionBlindDemo demo;
  const Checkpoint model = LoadCheckpoint(model_path);
  const Llama2cTokenizer tok = Llama2cTokenizer::Load(tokenizer_path, model.config.vocab_size);
  demo.dim = model.config.dim;
  demo.n_heads = model.config.n_heads;
  demo.n_kv_heads = model.config.n_kv_heads;
  demo.head_dim = model.config.head_dim();
  demo.tokens_a = tok.Encode(demo.sentence_a, false, false);
  demo.tokens_b = tok.Encode(demo.sentence_b, false, false);
  for (int id : demo.tokens_a) demo.pieces_a.push_back(tok.Piece(id));
  for (int id : demo.tokens_b) demo.pieces_b.push_back(tok.Piece(id));
  demo.permutation = WordPermutation(tok, demo.sentence_a, demo.sentence_b, demo.tokens_a, demo.tokens_b);
  const int64_t n = static_cast<int64_t>(demo.tokens_a.size()), dim = demo.dim;
  const std::vector<std::pair<PositionEncoding, bool>> runs = {
      {PositionEncoding::kNone, false},    {PositionEncoding::kNone, true},  {PositionEncoding::kSinusoidal, false},
      {PositionEncoding::kLearned, false}, {PositionEncoding::kRope, false}, {PositionEncoding::kRope, true}};
  // the token shown: the first token of b's last word ("cat")
  demo.shown_token_b = n - static_cast<int64_t>(tok.Encode(LastWord(demo.sentence_b), false, false).size());
  const int64_t shown_a = demo.permutation[static_cast<size_t>(demo.shown_token_b)];
  for (const auto& [encoding, causal] : runs) {
    const LayerRun a = RunLayer(model, demo.tokens_a, encoding, causal);
    const LayerRun b = RunLayer(model, demo.tokens_b, encoding, causal);
    PositionBlindVariant v;
    v.encoding = encoding;
    v.causal = causal;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = demo.permutation[static_cast<size_t>(j)];
      double worst = 0.0;
      for (int64_t c = 0; c < dim; ++c) {
        worst = std::max(worst, std::fabs(static_cast<double>(b.out[static_cast<size_t>(j * dim + c)]) -
                                          a.out[static_cast<size_t>(i * dim + c)]));
      }
      v.token_diff.push_back(worst);
    }
    v.max_diff = *std::max_element(v.token_diff.begin(), v.token_diff.end());
    v.bound = PermutationBound(model, a);
    v.permuted = v.max_diff <= v.bound;
    if (!causal && (encoding == PositionEncoding::kNone || encoding == PositionEncoding::kRope)) {
      auto& sa = encoding == PositionEncoding::kNone ? demo.shown_none_a : demo.shown_rope_a;
      auto& sb = encoding == PositionEncoding::kNone ? demo.shown_none_b : demo.shown_rope_b;
      sa.assign(a.out.begin() + shown_a * dim, a.out.begin() + shown_a * dim + 4);
      sb.assign(b.out.begin() + demo.shown_token_b * dim, b.out.begin() + demo.shown_token_b * dim + 4);
    }
    demo.variants.push_back(v);
  }
  return demo;
}

std::string RenderPositionBlindDemo(const PositionBlindDemo& demo) {
  auto quoted = [](const std::vector<std::string>& pieces) {
    std::vector<std::string> q;
    for (const std::string& p : pieces) q.push_back(fmt::format("'{}'", p));
    return fmt::format("[{}]", fmt::join(q, " "));
  };
  std::string out;
  out += "== position-blind: attention without positions cannot see word order ==\n\n";
  out += fmt::format(
      "The bundled model's layer 0 (dim {}, {} heads, {} kv heads, head_dim {}): token embeddings,\n"
      "RMSNorm, q/k/v projections, attention, wo.\n",
      demo.dim, demo.n_heads, demo.n_kv_heads, demo.head_dim);
  out += fmt::format("  A = \"{}\": ids [{}]\n      pieces {}\n", demo.sentence_a, fmt::join(demo.tokens_a, ", "),
                     quoted(demo.pieces_a));
  out += fmt::format("  B = \"{}\": ids [{}]\n      pieces {}\n", demo.sentence_b, fmt::join(demo.tokens_b, ", "),
                     quoted(demo.pieces_b));
  out += fmt::format("  B is A permuted: B[j] = A[perm[j]], perm = [{}]\n\n", fmt::join(demo.permutation, ", "));
  out += "Is output_B[j] = output_A[perm[j]] for every token j? max |difference| over the 64 channels:\n";
  out += fmt::format("  {:>4} {:<7}", "", "pos.");
  for (const PositionBlindVariant& v : demo.variants) out += fmt::format(" {:>11}", PositionEncodingName(v.encoding));
  out += fmt::format("\n  {:>4} {:<7}", "j", "mask");
  for (const PositionBlindVariant& v : demo.variants) out += fmt::format(" {:>11}", v.causal ? "causal" : "full");
  out += "\n";
  for (size_t j = 0; j < demo.pieces_b.size(); ++j) {
    out += fmt::format("  {:>4} {:<7}", j, fmt::format("'{}'", demo.pieces_b[j]));
    for (const PositionBlindVariant& v : demo.variants) out += fmt::format(" {:>11.2e}", v.token_diff[j]);
    out += "\n";
  }
  out += fmt::format("  {:>4} {:<7}", "", "bound");
  for (const PositionBlindVariant& v : demo.variants) out += fmt::format(" {:>11.2e}", v.bound);
  out += fmt::format("\n  {:>4} {:<7}", "", "verdict");
  for (const PositionBlindVariant& v : demo.variants)
    out += fmt::format(" {:>11}", v.permuted ? "permuted" : "different");
  out += "\n  (bound: float32 rounding if only the order of the keys differed; 0 means bit-identical)\n\n";
  auto vec = [](const std::vector<float>& v) { return fmt::format("[{:10.6f}]", fmt::join(v, ",")); };
  const std::string piece = demo.pieces_b[static_cast<size_t>(demo.shown_token_b)];
  out += fmt::format("First 4 output channels of '{}' (the start of \"{}\"; full attention):\n", piece,
                     LastWord(demo.sentence_b));
  out +=
      fmt::format("  no positions: in A {}\n                in B {}\n", vec(demo.shown_none_a), vec(demo.shown_none_b));
  out += fmt::format("  RoPE:         in A {}\n                in B {}\n\n", vec(demo.shown_rope_a),
                     vec(demo.shown_rope_b));
  out +=
      "Without positions the layer sees a bag of tokens: \"cat\" gets the same vector whether it eats or is\n"
      "eaten. Any of sinusoidal, learned (even an untrained table) or RoPE breaks the tie.\n"
      "Not the usual story: a causal mask alone breaks it too. With the mask, token j attends to itself and\n"
      "the j tokens before it, so only the first token ('the', alone in both) matches; the rest differ.\n"
      "Permutation equivariance is a property of unmasked attention (encoders). Decoder-only models\n"
      "without any positional encoding (NoPE) can and do learn positions from the mask.\n";
  return out;
}

}  // namespace posenc::demo
