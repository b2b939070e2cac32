// gemma3: Gemma 3 text models (Gemma3ForCausalLM, model_type gemma3_text): the Gemma 2 block with an RMSNorm
// over each head of q and k ((1 + w), before RoPE), local layers (sliding window, rope_local_base_freq θ 10k,
// no scaling) and global ones (rope_theta 1M with the config's scaling, e.g. linear 8) in a 5:1 pattern
// (sliding_window_pattern, or layer_types; transformers v5 gives rope_parameters per layer type).
// GGUF "gemma3": rope.freq_base / rope.freq_base_swa, attention.sliding_window, attention.sliding_window_pattern
// (absent: llama.cpp's period 6), norm weights with the 1 added by the converter.
// Source: transformers models/gemma3/modeling_gemma3.py, configuration_gemma3.py; llama.cpp
// src/models/gemma3-iswa.cpp, llama-model.cpp LLM_ARCH_GEMMA3 (set_swa_pattern, rope_freq_base_train_swa).
#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

constexpr int64_t k27bLayers = 62;      // llama.cpp's LLM_TYPE_27B for Gemma 3
constexpr int64_t kDefaultPeriod = 6;   // Gemma3TextConfig sliding_window_pattern; llama.cpp's swa period

// Layer i is global iff (i + 1) % period == 0 (transformers; llama.cpp set_swa_pattern: il % n < n - 1 slides).
bool Sliding(int64_t i, int64_t period) { return period == 0 || (i + 1) % period != 0; }

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  arch::ReadGgufShape(k, c);
  arch::SetGemmaBlock(c);
  c.qk_norm = QkNorm::kPerHead;
  c.query_pre_attn_scalar = arch::GgufGemmaQueryScalar(c, k27bLayers);
  c.attn_logit_softcapping = k.OptFloat("attn_logit_softcapping");
  c.final_logit_softcapping = k.OptFloat("final_logit_softcapping");
  LayerSpec global, local;
  arch::ReadGgufRope(k, c, notes, global);
  arch::ReadGgufRope(k, c, notes, local, "rope.freq_base_swa", /*scaled=*/false);
  const std::optional<int64_t> window = arch::GgufSlidingWindow(k);
  std::vector<int64_t> sliding(static_cast<size_t>(c.n_layers), 0);
  if (window) {
    const std::optional<std::vector<int64_t>> pattern = k.OptIntsOrArray("attention.sliding_window_pattern", c.n_layers);
    const bool per_layer = pattern && k.file().TypeOf(k.Key("attention.sliding_window_pattern")) == GgufType::kArray;
    const int64_t period = pattern && !per_layer ? (*pattern)[0] : kDefaultPeriod;
    if (!pattern) {
      notes.Add(fmt::format("{} absent: llama.cpp's period {} (every {}th layer global)",
                            k.Key("attention.sliding_window_pattern"), kDefaultPeriod, kDefaultPeriod));
    }
    for (int64_t i = 0; i < c.n_layers; ++i) {
      sliding[static_cast<size_t>(i)] = per_layer ? (*pattern)[static_cast<size_t>(i)] : Sliding(i, period);
    }
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    if (sliding[static_cast<size_t>(i)]) {
      LayerSpec l = local;
      l.type = "sliding_attention";
      l.sliding_window = *window;
      c.layers.push_back(l);
    } else {
      c.layers.push_back(global);
    }
  }
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  arch::CheckGemmaActivation(k);
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6, /*tie_default=*/true);
  arch::SetGemmaBlock(c);
  c.qk_norm = QkNorm::kPerHead;
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  c.query_pre_attn_scalar = k.OptFloat("query_pre_attn_scalar");  // Gemma2Attention: scaling = it ** -0.5
  c.attn_logit_softcapping = k.OptFloat("attn_logit_softcapping");
  c.final_logit_softcapping = k.OptFloat("final_logit_softcapping");
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  // v4: the global RoPE is rope_theta + rope_scaling; the local one rope_local_base_freq, unscaled.
  RopeParams local_v4;
  const bool nested = !ropes.count("");
  if (!nested) {
    local_v4 = ropes.at("");
    local_v4.rope_type = RopeType::kDefault;
    local_v4.factor.reset();
    local_v4.original_max_position_embeddings.reset();
    local_v4.attention_factor.reset();
    local_v4.rope_theta = k.OptFloat("rope_local_base_freq").value_or(10000.0);
  } else if (k.Has("rope_local_base_freq")) {
    throw ConfigError(fmt::format("{}: rope_local_base_freq cannot be combined with rope_parameters per layer type",
                                  k.source()));
  }
  const std::optional<int64_t> window = k.OptSize("sliding_window");
  std::optional<std::vector<std::string>> types = arch::ReadHfLayerTypes(k, c.n_layers);
  const int64_t period = k.OptSize("sliding_window_pattern").value_or(kDefaultPeriod);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerSpec l;
    l.type = types ? (*types)[static_cast<size_t>(i)] : (Sliding(i, period) ? "sliding_attention" : "full_attention");
    if (l.type == "sliding_attention") {
      l.rope_params = nested ? arch::RopeFor(ropes, l.type, k.source()) : local_v4;
      if (window) l.sliding_window = *window;
    } else {
      l.rope_params = arch::RopeFor(ropes, l.type, k.source());
    }
    c.layers.push_back(l);
  }
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::GemmaHfNames(), /*norm_plus_one=*/true);
}

}  // namespace

extern const Architecture kGemma3Architecture{"gemma3", {"gemma3"}, {"Gemma3ForCausalLM"}, {"gemma3_text"}, FromGguf,
                                              FromHf};

}  // namespace posenc
