// gemma2: Gemma 2 (Gemma2ForCausalLM): sandwich (1 + w) RMSNorms, GeGLU (tanh GELU), embeddings times sqrt(dim),
// scores scaled by query_pre_attn_scalar^-1/2 and soft-capped (attn_logit_softcapping), final logits soft-capped,
// sliding-window attention on every other layer (0, 2, ...). GGUF "gemma2" (norm weights with the 1 added by the
// converter; llama.cpp's query scale 1 / sqrt(head_dim), except its 27B rule).
// Source: transformers models/gemma2/modeling_gemma2.py, configuration_gemma2.py (layer_types); llama.cpp
// src/models/gemma2-iswa.cpp, llama-model.cpp LLM_ARCH_GEMMA2.
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

constexpr int64_t k27bLayers = 46;  // llama.cpp's LLM_TYPE_27B for Gemma 2

// Gemma2Config: layer i slides unless (i + 1) % 2 == 0; llama.cpp set_swa_pattern(2): the same layers.
bool Sliding(int64_t i) { return (i + 1) % 2 != 0; }

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  arch::ReadGgufShape(k, c);
  arch::SetGemmaBlock(c);
  c.query_pre_attn_scalar = arch::GgufGemmaQueryScalar(c, k27bLayers);
  c.attn_logit_softcapping = k.OptFloat("attn_logit_softcapping");
  c.final_logit_softcapping = k.OptFloat("final_logit_softcapping");
  const std::optional<int64_t> window = arch::GgufSlidingWindow(k);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerSpec l = spec;
    if (window && Sliding(i)) {
      l.type = "sliding_attention";
      l.sliding_window = *window;
    }
    c.layers.push_back(l);
  }
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  arch::CheckGemmaActivation(k);
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6, /*tie_default=*/true);
  arch::SetGemmaBlock(c);
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  c.query_pre_attn_scalar = k.OptFloat("query_pre_attn_scalar");  // Gemma2Attention: scaling = it ** -0.5
  c.attn_logit_softcapping = k.OptFloat("attn_logit_softcapping");
  c.final_logit_softcapping = k.OptFloat("final_logit_softcapping");
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  const std::optional<int64_t> window = k.OptSize("sliding_window");
  std::optional<std::vector<std::string>> types = arch::ReadHfLayerTypes(k, c.n_layers);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerSpec l;
    l.type = types ? (*types)[static_cast<size_t>(i)] : (Sliding(i) ? "sliding_attention" : "full_attention");
    l.rope_params = arch::RopeFor(ropes, l.type, k.source());
    if (l.type == "sliding_attention" && window) l.sliding_window = *window;
    c.layers.push_back(l);
  }
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::GemmaHfNames(), /*norm_plus_one=*/true);
}

}  // namespace

extern const Architecture kGemma2Architecture{"gemma2", {"gemma2"}, {"Gemma2ForCausalLM"}, {"gemma2"}, FromGguf,
                                              FromHf};

}  // namespace posenc
