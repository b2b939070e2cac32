// llama: Llama 1/2/3.x, TinyLlama, SmolLM2 and the models posenc train writes. Pre-RMSNorm blocks, GQA attention
// with RoPE on every layer, SwiGLU. GGUF "llama" (llama.cpp's NORM rope mode: the converter permutes the HF q/k
// rows into interleaved pairs; Llama 3.1 files carry rope_freqs.weight); HF LlamaForCausalLM (half-split rows).
// Source: transformers models/llama/modeling_llama.py; llama.cpp src/models/llama.cpp, llama-model.cpp LLM_ARCH_LLAMA.
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

// posenc train writes its position encoding as posenc.position_encoding: rope (default), learned (the trained
// table position_embd.weight, context_length rows), sinusoidal (the fixed table of Vaswani et al. 2017 Sec. 3.5,
// recomputed here) or none (no positions at all).
void ReadPosencPositions(GgufKeys& k, ModelConfig& c) {
  const std::optional<std::string_view> pe = k.file().FindString("posenc.position_encoding");
  if (!pe || *pe == "rope") return;
  if (*pe != "learned" && *pe != "sinusoidal" && *pe != "none") {
    throw ConfigError(fmt::format("{}: posenc.position_encoding must be rope, learned, sinusoidal or none, got '{}'",
                                  k.source(), *pe));
  }
  for (LayerSpec& l : c.layers) l.rope = false;
  if (*pe == "learned") {
    c.absolute_positions = AbsolutePositions::kLearned;
  } else if (*pe == "sinusoidal") {
    c.absolute_positions = AbsolutePositions::kSinusoidal;
  }
  c.n_positions = c.absolute_positions == AbsolutePositions::kNone ? 0 : c.train_ctx;
}

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kInterleaved;  // llama.cpp LLAMA_ROPE_TYPE_NORM
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (k.Has("attention.sliding_window")) {
    k.MarkRead("attention.sliding_window");
    notes.Add(fmt::format("{} is written but llama.cpp's llama architecture runs full causal attention: ignored",
                          k.Key("attention.sliding_window")));
  }
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::ReadGgufRopeFactors(k, t, m, spec);
  arch::SetLayers(c, spec);
  ReadPosencPositions(k, c);
  // llama.cpp's llama graph adds q/k/v and output biases where the file has them (LLM_TENSOR_ATTN_*, optional).
  c.attn_qkv_bias = t.Has("blk.0.attn_q.bias");
  c.attn_output_bias = t.Has("blk.0.attn_output.bias");
  if (c.absolute_positions == AbsolutePositions::kLearned) {
    if (const std::optional<TensorView> pe = t.Optional("position_embd.weight"); pe && pe->shape.size() == 2) {
      c.n_positions = pe->shape[0];
    }
  }
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  if (k.Bool("mlp_bias", false)) throw ConfigError(fmt::format("{}: mlp_bias = true is not supported", k.source()));
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6);
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  LayerSpec spec;
  spec.rope_params = arch::RopeFor(ropes, "full_attention", k.source());
  arch::SetLayers(c, spec);
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kLlamaArchitecture{"llama", {"llama"}, {"LlamaForCausalLM"}, {"llama"}, FromGguf, FromHf};

}  // namespace posenc
