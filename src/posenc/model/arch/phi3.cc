// phi3: Phi-3, Phi-3.5-mini, Phi-4-mini (Phi3ForCausalLM): a Llama block with fused projections (qkv_proj rows
// [Q; K; V], gate_up_proj rows [gate; up]), LongRoPE (rope_scaling type longrope, legacy "su": short factors up
// to original_max_position_embeddings, long ones past it, attention factor sqrt(1 + ln s / ln L0)), partial
// rotary (partial_rotary_factor), and config.json's sliding_window. GGUF "phi3": attn_qkv, ffn_up holding
// [gate; up], rope_factors_long/short.weight, rope.scaling.attn_factor; llama.cpp runs it without a window.
// Source: transformers models/phi3/modeling_phi3.py, modeling_rope_utils.py _compute_longrope_parameters;
// llama.cpp src/models/phi3.cpp, llama-model.cpp LLM_ARCH_PHI3.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

// [gate; up] rows of a fused feed-forward matrix.
void SplitGateUp(const TensorView& fused, int64_t hidden_dim, LayerTensors& l) {
  l.w_gate = SliceRows(fused, 0, hidden_dim, "gate");
  l.w_up = SliceRows(fused, hidden_dim, hidden_dim, "up");
}

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;  // llama.cpp LLAMA_ROPE_TYPE_NEOX
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (k.Has("attention.sliding_window")) {
    k.MarkRead("attention.sliding_window");
    notes.Add(fmt::format("{} is written but llama.cpp's phi3 runs full causal attention (swa_type none): ignored",
                          k.Key("attention.sliding_window")));
  }
  arch::ReadGgufRopeFactors(k, t, m, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  c.gated_ffn = false;  // read ffn_up alone, then split it
  arch::ReadGgufTensors(t, c, m);
  c.gated_ffn = true;
  for (LayerTensors& l : m.layers) SplitGateUp(l.w_up, c.hidden_dim, l);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-5);
  if (k.Bool("attention_bias", false)) {
    throw ConfigError(fmt::format("{}: attention_bias = true is not supported for phi3", k.source()));
  }
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  LayerSpec spec;
  spec.rope_params = arch::RopeFor(ropes, "full_attention", k.source());
  if (const std::optional<int64_t> w = k.OptSize("sliding_window")) {
    spec.type = "sliding_attention";
    spec.sliding_window = *w;
  }
  arch::SetLayers(c, spec);
  c.train_ctx = arch::HfTrainCtx(k, c);
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  m.token_embd = t.Require("model.embed_tokens.weight");
  m.output_norm.weight = t.Require("model.norm.weight");
  if (!c.tied_embeddings) m.output = t.Require("lm_head.weight");
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("model.layers.{}.", i);
    LayerTensors l;
    l.attn_norm = NormTensors{t.Require(b + "input_layernorm.weight"), std::nullopt, false};
    const TensorView qkv = t.Require(b + "self_attn.qkv_proj.weight");
    l.wq = SliceRows(qkv, 0, q, "q");
    l.wk = SliceRows(qkv, q, kv, "k");
    l.wv = SliceRows(qkv, q + kv, kv, "v");
    l.wo = t.Require(b + "self_attn.o_proj.weight");
    l.ffn_norm = NormTensors{t.Require(b + "post_attention_layernorm.weight"), std::nullopt, false};
    SplitGateUp(t.Require(b + "mlp.gate_up_proj.weight"), c.hidden_dim, l);
    l.w_down = t.Require(b + "mlp.down_proj.weight");
    m.layers.push_back(std::move(l));
  }
}

}  // namespace

extern const Architecture kPhi3Architecture{"phi3", {"phi3"}, {"Phi3ForCausalLM"}, {"phi3"}, FromGguf, FromHf};

}  // namespace posenc
