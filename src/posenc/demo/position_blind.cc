#include "posenc/demo/position_blind.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "posenc/attention/attention.h"
#include "posenc/core/errors.h"
#include "posenc/demo/common.h"
#include "posenc/model/loader.h"
#include "posenc/pe/learned.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/tokenizer/load.h"

namespace posenc::demo {
namespace {

// A WeightMatrix that reads another's rows (its float32 rows, or its file encoding) without owning them; `m`
// must outlive it.
WeightMatrix ViewOf(const WeightMatrix& m) {
  WeightMatrix v;
  v.rows = m.rows;
  v.cols = m.cols;
  v.f32 = m.f32;
  v.source = m.source;
  v.bf16 = m.bf16;
  return v;
}

LayerWeights ViewOf(const LayerWeights& l) {
  LayerWeights v;
  v.attn_norm = l.attn_norm;
  v.wq = ViewOf(l.wq);
  v.wk = ViewOf(l.wk);
  v.wv = ViewOf(l.wv);
  v.bq = l.bq;
  v.bk = l.bk;
  v.bv = l.bv;
  v.q_norm = l.q_norm;
  v.k_norm = l.k_norm;
  v.wo = ViewOf(l.wo);
  v.bo = l.bo;
  v.attn_post_norm = l.attn_post_norm;
  v.ffn_norm = l.ffn_norm;
  v.w_gate = ViewOf(l.w_gate);
  v.w_up = ViewOf(l.w_up);
  v.b_up = l.b_up;
  v.w_down = ViewOf(l.w_down);
  v.b_down = l.b_down;
  v.ffn_post_norm = l.ffn_post_norm;
  return v;
}

// The RoPE of the rope variants: layer 0's as the file states it (its rope type's inv_freq, GGUF rope_freqs
// divisors, attention factor and magnitude folded into cos/sin), else rope_theta 10000 over head_dim.
struct VariantRope {
  RopeFrequencies freqs;
  double magnitude = 1.0;
  bool from_model = false;
};

VariantRope MakeVariantRope(const ModelConfig& c) {
  VariantRope r;
  const LayerSpec& l0 = c.layers.front();
  if (!l0.rope) {
    r.freqs.inv_freq = DefaultInvFreq(10000.0, c.head_dim);
    return r;
  }
  r.freqs = ComputeRopeFrequencies(l0.rope_params);
  for (size_t i = 0; i < l0.rope_freq_factors.size() && i < r.freqs.inv_freq.size(); ++i) {
    r.freqs.inv_freq[i] /= l0.rope_freq_factors[i];
  }
  r.magnitude = l0.rope_magnitude;
  r.from_model = true;
  return r;
}

// Everything one run of layer 0 computes, kept for the rounding bound.
struct LayerRun {
  std::vector<float> q, k, v;  // [n, q_dim], [n, kv_dim], [n, kv_dim] (q, k rotated for kRope)
  std::vector<float> att;      // [n, q_dim]: attention output before wo
  std::vector<float> out;      // [n, dim]: wo att (+ bo)
};

LayerRun RunLayer(const Transformer& model, const std::vector<int>& tokens, PositionEncoding encoding, bool causal) {
  const ModelConfig& full = model.config();
  const int64_t n = static_cast<int64_t>(tokens.size()), dim = full.dim, q_dim = full.q_dim(),
                kv_dim = full.kv_dim(), hd = full.head_dim;
  // The model cut to its layer 0, with the variant's absolute positions (none of the model's own).
  ModelConfig c = full;
  c.n_layers = 1;
  c.layers.resize(1);
  c.absolute_positions = AbsolutePositions::kNone;
  c.n_positions = 0;
  TransformerWeights w;
  w.token_embd = ViewOf(model.weights().token_embd);
  w.output_norm = model.weights().output_norm;
  w.layers.push_back(ViewOf(model.weights().layers.front()));
  if (encoding == PositionEncoding::kSinusoidal) {
    c.absolute_positions = AbsolutePositions::kSinusoidal;  // d_model = dim, base 10000
    c.n_positions = n;
  } else if (encoding == PositionEncoding::kLearned) {
    LearnedPositionalEmbedding pe(n, dim);
    InitLearnedPeNormal(pe, /*seed=*/1);
    c.absolute_positions = AbsolutePositions::kLearned;
    c.n_positions = n;
    w.position_embd.rows = n;
    w.position_embd.cols = dim;
    w.position_embd.owned.assign(pe.table().begin(), pe.table().end());
    w.position_embd.f32 = w.position_embd.owned.data();
  }
  std::vector<int64_t> positions(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) positions[static_cast<size_t>(t)] = t;
  const AttentionDims dims{full.n_heads, full.n_kv_heads, hd};
  ScoreOptions options = LayerScoreOptions(full, 0);
  options.window = 0;  // the variants are full or causal attention over these few tokens
  LayerRun run;
  const auto attend = [&](int64_t, ForwardState& s, int64_t rows) {
    if (encoding == PositionEncoding::kRope) {
      const VariantRope rope = MakeVariantRope(full);
      CosSinTable table = ComputeCosSin(rope.freqs, positions);  // row t = position t
      if (rope.magnitude != 1.0) {
        for (float& x : table.cos) x = static_cast<float>(x * rope.magnitude);
        for (float& x : table.sin) x = static_cast<float>(x * rope.magnitude);
      }
      ApplyRopeQK(HeadsView::Contiguous(s.q.data(), rows, full.n_heads, hd),
                  HeadsView::Contiguous(s.k.data(), rows, full.n_kv_heads, hd), positions, View(table),
                  full.rope_layout);
    }
    run.q.assign(s.q.begin(), s.q.begin() + rows * q_dim);
    run.k.assign(s.k.begin(), s.k.begin() + rows * kv_dim);
    run.v.assign(s.v.begin(), s.v.begin() + rows * kv_dim);
    std::fill(s.att.begin(), s.att.begin() + rows * q_dim, 0.0f);
    if (causal) {
      const AttentionInputs in{s.q.data(), rows, q_dim, 0, s.k.data(), s.v.data(), rows, kv_dim};
      CausalAttention(dims, in, 1.0f, s.att.data(), q_dim, s.attention, options);
    } else {
      // full attention: each query alone, placed at position n-1, sees every key
      for (int64_t t = 0; t < rows; ++t) {
        const AttentionInputs in{s.q.data() + t * q_dim, 1, q_dim, rows - 1, s.k.data(), s.v.data(), rows, kv_dim};
        CausalAttention(dims, in, 1.0f, s.att.data() + t * q_dim, q_dim, s.attention, options);
      }
    }
    run.att.assign(s.att.begin(), s.att.begin() + rows * q_dim);
  };
  ForwardState state;
  RunDecoderBlocks(c, w, tokens, positions, /*absolute_scale=*/1.0, state, attend);
  const LayerWeights& l0 = model.weights().layers.front();
  run.out.assign(static_cast<size_t>(n * dim), 0.0f);
  Linear(l0.wo, n, run.att.data(), q_dim, run.out.data(), dim);
  if (!l0.bo.empty()) {
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t i = 0; i < dim; ++i) run.out[static_cast<size_t>(t * dim + i)] += l0.bo[static_cast<size_t>(i)];
    }
  }
  return run;
}

// LayerZeroPermutationBound (derivation in the header).
double PermutationBound(const Transformer& model, const LayerRun& run) {
  const ModelConfig& cfg = model.config();
  const int64_t hd = cfg.head_dim, dim = cfg.dim, q_dim = cfg.q_dim(), kv_dim = cfg.kv_dim();
  const int64_t n = static_cast<int64_t>(run.q.size()) / q_dim;
  const int64_t kv_mul = cfg.n_heads / cfg.n_kv_heads;
  double qk = 0.0;
  for (int64_t h = 0; h < cfg.n_heads; ++h) {
    const int64_t kvh = h / kv_mul;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double s = 0.0;
        for (int64_t c = 0; c < hd; ++c) {
          s += std::fabs(run.q[static_cast<size_t>(i * q_dim + h * hd + c)]) *
               std::fabs(run.k[static_cast<size_t>(j * kv_dim + kvh * hd + c)]);
        }
        qk = std::max(qk, s);
      }
    }
  }
  const double u = kF32Roundoff;
  const double scale = 1.0 / std::sqrt(cfg.query_pre_attn_scalar.value_or(static_cast<double>(hd)));
  double eps_s = static_cast<double>(hd) * u * qk * scale;
  if (cfg.attn_logit_softcapping) eps_s += 4.0 * u * *cfg.attn_logit_softcapping;
  double vmax = 0.0, amax = 0.0, w1 = 0.0;
  for (float v : run.v) vmax = std::max(vmax, static_cast<double>(std::fabs(v)));
  for (float a : run.att) amax = std::max(amax, static_cast<double>(std::fabs(a)));
  const WeightMatrix& wo = model.weights().layers.front().wo;
  std::vector<float> row(static_cast<size_t>(q_dim));
  for (int64_t r = 0; r < dim; ++r) {
    wo.Row(r, row.data());
    double s = 0.0;
    for (float x : row) s += std::fabs(static_cast<double>(x));
    w1 = std::max(w1, s);
  }
  const double e = (eps_s + (2.0 * static_cast<double>(n) + 6.0) * u) * vmax;
  return w1 * 2.0 * e + 2.0 * static_cast<double>(q_dim) * u * w1 * amax;
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
std::vector<int64_t> WordPermutation(const Tokenizer& tok, const std::string& a, const std::string& b,
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

std::vector<float> LayerZeroAttention(const Transformer& model, const std::vector<int>& tokens,
                                      PositionEncoding encoding, bool causal) {
  return RunLayer(model, tokens, encoding, causal).out;
}

double LayerZeroPermutationBound(const Transformer& model, const std::vector<int>& tokens, PositionEncoding encoding,
                                 bool causal) {
  return PermutationBound(model, RunLayer(model, tokens, encoding, causal));
}

PositionBlindDemo RunPositionBlindDemo(const std::string& model_path, const std::string& tokenizer_path) {
  PositionBlindDemo demo;
  const Transformer model = Transformer::Load(model_path);
  const std::unique_ptr<Tokenizer> tok = LoadModelTokenizer(model_path, tokenizer_path);
  const ModelConfig& cfg = model.config();
  demo.model_name = ModelName(model_path);
  demo.architecture = cfg.architecture;
  demo.norm = cfg.norm == NormType::kRms ? "RMSNorm" : "LayerNorm";
  const VariantRope rope = MakeVariantRope(cfg);
  demo.rope = fmt::format("{} pairs, {} frequencies", cfg.rope_layout == RopeLayout::kInterleaved ? "interleaved"
                                                                                                   : "half-split",
                          rope.freqs.inv_freq.size());
  if (rope.from_model) {
    demo.rope += fmt::format(", rope_theta {:g} ({}): layer 0's own", cfg.layers.front().rope_params.rope_theta,
                             RopeTypeName(cfg.layers.front().rope_params.rope_type));
  } else {
    demo.rope += ", rope_theta 10000: layer 0 has no RoPE of its own";
  }
  if (cfg.absolute_positions != AbsolutePositions::kNone) {
    demo.model_positions = std::string(AbsolutePositionsName(cfg.absolute_positions));
  }
  demo.dim = cfg.dim;
  demo.n_heads = cfg.n_heads;
  demo.n_kv_heads = cfg.n_kv_heads;
  demo.head_dim = cfg.head_dim;
  demo.tokens_a = tok->Encode(demo.sentence_a, false, false);
  demo.tokens_b = tok->Encode(demo.sentence_b, false, false);
  for (int id : demo.tokens_a) demo.pieces_a.push_back(tok->Piece(id));
  for (int id : demo.tokens_b) demo.pieces_b.push_back(tok->Piece(id));
  demo.permutation = WordPermutation(*tok, demo.sentence_a, demo.sentence_b, demo.tokens_a, demo.tokens_b);
  const int64_t n = static_cast<int64_t>(demo.tokens_a.size()), dim = demo.dim;
  const std::vector<std::pair<PositionEncoding, bool>> runs = {
      {PositionEncoding::kNone, false},    {PositionEncoding::kNone, true},  {PositionEncoding::kSinusoidal, false},
      {PositionEncoding::kLearned, false}, {PositionEncoding::kRope, false}, {PositionEncoding::kRope, true}};
  // the token shown: the first token of b's last word ("cat")
  // (the tokens of B without its last word are B's first tokens, whatever the tokenizer does with spaces)
  const std::string b_head = demo.sentence_b.substr(0, demo.sentence_b.rfind(' '));
  demo.shown_token_b = static_cast<int64_t>(tok->Encode(b_head, false, false).size());
  if (demo.shown_token_b >= n) {
    throw ConfigError(fmt::format("'{}' tokenizes to no token of its own after '{}'", demo.sentence_b, b_head));
  }
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
      "Layer 0 of {} ({}: dim {}, {} heads, {} kv heads, head_dim {}): token embeddings,\n"
      "{}, q/k/v projections, attention, wo.\nRoPE variants: {}.\n{}",
      demo.model_name, demo.architecture, demo.dim, demo.n_heads, demo.n_kv_heads, demo.head_dim, demo.norm,
      demo.rope,
      demo.model_positions.empty()
          ? ""
          : fmt::format("The model's own {} absolute positions are left out: each variant says where positions "
                        "enter.\n", demo.model_positions));
  out += fmt::format("  A = \"{}\": ids [{}]\n      pieces {}\n", demo.sentence_a, fmt::join(demo.tokens_a, ", "),
                     quoted(demo.pieces_a));
  out += fmt::format("  B = \"{}\": ids [{}]\n      pieces {}\n", demo.sentence_b, fmt::join(demo.tokens_b, ", "),
                     quoted(demo.pieces_b));
  out += fmt::format("  B is A permuted: B[j] = A[perm[j]], perm = [{}]\n\n", fmt::join(demo.permutation, ", "));
  out += fmt::format("Is output_B[j] = output_A[perm[j]] for every token j? max |difference| over the {} channels:\n",
                     demo.dim);
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
      "the j tokens before it, so only the tokens of the first word ('the', the same prefix in both) match;\n"
      "the rest differ.\n"
      "Permutation equivariance is a property of unmasked attention (encoders). Decoder-only models\n"
      "without any positional encoding (NoPE) can and do learn positions from the mask.\n";
  return out;
}

}  // namespace posenc::demo
