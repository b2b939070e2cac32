// gptneox: GPT-NeoX and Pythia (GPTNeoXForCausalLM): LayerNorm with bias, a parallel residual
// (x + attn(ln1 x) + mlp(ln2 x), use_parallel_residual), a fused query_key_value projection, partial rotary
// (rotary_pct, half-split over the first rotary_dim channels), a plain GELU feed-forward with biases.
// HF stores query_key_value rows per head as [q, k, v] of head_dim each; llama.cpp's converter reorders them to
// [Q; K; V], which is what GGUF "gptneox" holds; llama.cpp's GELU is the tanh form (ggml_gelu), transformers'
// hidden_act "gelu" the erf one.
// Source: transformers models/gpt_neox/modeling_gpt_neox.py; llama.cpp src/models/gptneox.cpp.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void SetBlock(ModelConfig& c, bool parallel) {
  c.rope_layout = RopeLayout::kHalfSplit;
  c.norm = NormType::kLayer;
  c.parallel_residual = parallel;
  c.gated_ffn = false;
  c.attn_qkv_bias = c.attn_output_bias = c.ffn_bias = true;
}

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  SetBlock(c, k.OptBool("use_parallel_residual").value_or(true));
  c.activation = Activation::kGeluTanh;  // ggml_gelu
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  const std::string act = k.OptString("hidden_act").value_or("gelu");
  if (act == "gelu") {
    c.activation = Activation::kGeluErf;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast") {
    c.activation = Activation::kGeluTanh;
  } else {
    throw ConfigError(fmt::format("{}: hidden_act must be gelu or gelu_new, got \"{}\"", k.source(), act));
  }
  SetBlock(c, k.Bool("use_parallel_residual", true));
  if (!k.Bool("attention_bias", true)) {
    throw ConfigError(fmt::format("{}: attention_bias = false is not supported for gpt_neox", k.source()));
  }
  arch::ReadHfShape(k, c, notes, "layer_norm_eps", 1e-5);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  LayerSpec spec;
  spec.rope_params = arch::RopeFor(ropes, "full_attention", k.source());
  arch::SetLayers(c, spec);
  c.train_ctx = arch::HfTrainCtx(k, c);
  const int64_t hd = c.head_dim, nh = c.n_heads;
  if (c.n_kv_heads != nh) {
    throw ConfigError(fmt::format("{}: gpt_neox has no grouped KV heads, got num_key_value_heads = {}", k.source(),
                                  c.n_kv_heads));
  }
  // query_key_value row r of head h: [h][part][d]; [Q; K; V] wants part-major rows.
  std::vector<int64_t> rows[3];
  for (int part = 0; part < 3; ++part) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t d = 0; d < hd; ++d) rows[part].push_back((h * 3 + part) * hd + d);
    }
  }
  auto norm = [&](const std::string& base) {
    return NormTensors{t.Require(base + ".weight"), t.Require(base + ".bias"), false};
  };
  m.token_embd = t.Require("gpt_neox.embed_in.weight");
  m.output_norm = norm("gpt_neox.final_layer_norm");
  if (!c.tied_embeddings) m.output = t.Require("embed_out.weight");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("gpt_neox.layers.{}.", i);
    for (const char* buffer : {"attention.bias", "attention.masked_bias", "attention.rotary_emb.inv_freq"}) {
      if (t.Has(b + buffer)) t.MarkUsed(b + buffer);  // buffers older checkpoints store: not weights
    }
    LayerTensors l;
    l.attn_norm = norm(b + "input_layernorm");
    const TensorView qkv = t.Require(b + "attention.query_key_value.weight");
    const TensorView qkv_bias = t.Require(b + "attention.query_key_value.bias");
    l.wq = GatherRows(qkv, rows[0], "q rows");
    l.wk = GatherRows(qkv, rows[1], "k rows");
    l.wv = GatherRows(qkv, rows[2], "v rows");
    l.bq = GatherRows(qkv_bias, rows[0], "q bias");
    l.bk = GatherRows(qkv_bias, rows[1], "k bias");
    l.bv = GatherRows(qkv_bias, rows[2], "v bias");
    l.wo = t.Require(b + "attention.dense.weight");
    l.bo = t.Require(b + "attention.dense.bias");
    l.ffn_norm = norm(b + "post_attention_layernorm");
    l.w_up = t.Require(b + "mlp.dense_h_to_4h.weight");
    l.b_up = t.Require(b + "mlp.dense_h_to_4h.bias");
    l.w_down = t.Require(b + "mlp.dense_4h_to_h.weight");
    l.b_down = t.Require(b + "mlp.dense_4h_to_h.bias");
    m.layers.push_back(std::move(l));
  }
}

}  // namespace

extern const Architecture kGptNeoXArchitecture{"gptneox", {"gptneox"}, {"GPTNeoXForCausalLM"}, {"gpt_neox"},
                                               FromGguf, FromHf};

}  // namespace posenc
