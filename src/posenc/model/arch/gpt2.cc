// gpt2: GPT-2 (GPT2LMHeadModel): learned absolute positions (wpe, n_positions rows) added to the token
// embeddings and no RoPE, pre-LayerNorm blocks with biases, a fused c_attn projection ([Q | K | V] columns of a
// Conv1D weight stored [in, out]), a plain GELU (gelu_new, tanh form) feed-forward, a tied classifier.
// Positions past n_positions have no row: an error naming the limit, or, with the method `linear`, the table
// interpolated like position interpolation. GGUF "gpt2": attn_qkv rows [Q; K; V], position_embd.weight.
// Source: transformers models/gpt2/modeling_gpt2.py; llama.cpp src/models/gpt2.cpp.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void SetBlock(ModelConfig& c) {
  c.norm = NormType::kLayer;
  c.gated_ffn = false;
  c.activation = Activation::kGeluTanh;
  c.attn_qkv_bias = c.attn_output_bias = c.ffn_bias = true;
  c.absolute_positions = AbsolutePositions::kLearned;
  LayerSpec nope;
  nope.rope = false;
  arch::SetLayers(c, nope);
}

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes&) {
  c.norm = NormType::kLayer;
  arch::ReadGgufShape(k, c);
  SetBlock(c);
  const TensorView& pe = t.Require("position_embd.weight");
  c.n_positions = pe.shape.size() == 2 ? pe.shape[0] : 0;
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes&) {
  const std::string act = k.OptString("activation_function").value_or("gelu_new");
  if (act != "gelu_new" && act != "gelu_pytorch_tanh") {
    throw ConfigError(fmt::format("{}: activation_function must be gelu_new, got \"{}\"", k.source(), act));
  }
  if (k.Bool("scale_attn_by_inverse_layer_idx", false)) {
    throw ConfigError(fmt::format("{}: scale_attn_by_inverse_layer_idx = true is not supported", k.source()));
  }
  if (!k.Bool("scale_attn_weights", true)) {
    throw ConfigError(fmt::format("{}: scale_attn_weights = false is not supported", k.source()));
  }
  k.MarkRead("reorder_and_upcast_attn");  // numerics of a half-precision run; float32 here either way
  c.dim = k.Size("n_embd");
  c.n_layers = k.LayerCount("n_layer");
  c.n_heads = c.n_kv_heads = k.Size("n_head");
  c.hidden_dim = k.OptSize("n_inner").value_or(4 * c.dim);
  c.vocab_size = k.Size("vocab_size");
  if (c.dim % c.n_heads != 0) {
    throw ConfigError(fmt::format("{}: n_embd = {} is not a multiple of n_head = {}", k.source(), c.dim, c.n_heads));
  }
  c.head_dim = c.dim / c.n_heads;
  c.norm_eps = k.OptFloat("layer_norm_epsilon").value_or(1e-5);
  c.tied_embeddings = k.Bool("tie_word_embeddings", true);
  SetBlock(c);
  c.n_positions = k.Size("n_positions");
  k.MarkRead("n_ctx");
  c.train_ctx = c.n_positions;
  // Weights live under "transformer." (GPT2LMHeadModel) or at the top (GPT2Model checkpoints).
  const std::string p = t.Has("transformer.wte.weight") ? "transformer." : "";
  auto norm = [&](const std::string& base) {
    return NormTensors{t.Require(base + ".weight"), t.Require(base + ".bias"), false};
  };
  m.token_embd = t.Require(p + "wte.weight");
  m.position_embd = t.Require(p + "wpe.weight");
  m.output_norm = norm(p + "ln_f");
  if (!c.tied_embeddings) m.output = t.Require("lm_head.weight");
  if (c.tied_embeddings && t.Has("lm_head.weight")) t.MarkUsed("lm_head.weight");  // a copy of wte when tied
  const int64_t d = c.dim;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("{}h.{}.", p, i);
    for (const char* buffer : {"attn.bias", "attn.masked_bias"}) {
      if (t.Has(b + buffer)) t.MarkUsed(b + buffer);  // the causal-mask buffers of older checkpoints
    }
    LayerTensors l;
    l.attn_norm = norm(b + "ln_1");
    const TensorView qkv = Transpose(t.Require(b + "attn.c_attn.weight"));  // Conv1D [in, 3 dim] -> [3 dim, in]
    const TensorView qkv_bias = t.Require(b + "attn.c_attn.bias");
    l.wq = SliceRows(qkv, 0, d, "q");
    l.wk = SliceRows(qkv, d, d, "k");
    l.wv = SliceRows(qkv, 2 * d, d, "v");
    l.bq = SliceVector(qkv_bias, 0, d, "q");
    l.bk = SliceVector(qkv_bias, d, d, "k");
    l.bv = SliceVector(qkv_bias, 2 * d, d, "v");
    l.wo = Transpose(t.Require(b + "attn.c_proj.weight"));
    l.bo = t.Require(b + "attn.c_proj.bias");
    l.ffn_norm = norm(b + "ln_2");
    l.w_up = Transpose(t.Require(b + "mlp.c_fc.weight"));
    l.b_up = t.Require(b + "mlp.c_fc.bias");
    l.w_down = Transpose(t.Require(b + "mlp.c_proj.weight"));
    l.b_down = t.Require(b + "mlp.c_proj.bias");
    m.layers.push_back(std::move(l));
  }
}

}  // namespace

extern const Architecture kGpt2Architecture{"gpt2", {"gpt2"}, {"GPT2LMHeadModel"}, {"gpt2"}, FromGguf, FromHf};

}  // namespace posenc
