// smollm3: SmolLM3 (SmolLM3ForCausalLM): a Llama block in which some layers have no positional encoding (NoPE):
// config.json `no_rope_layers` (1: RoPE, 0: NoPE, per layer), else every `no_rope_layer_interval`-th layer
// ((i + 1) % interval == 0) is NoPE. GGUF "smollm3": llama.cpp hard-codes NoPE where (il + 1) % 4 == 0 (no key
// exists for it).
// Source: transformers models/smollm3/configuration_smollm3.py, modeling_smollm3.py (use_rope per layer);
// llama.cpp src/models/smollm3.cpp (n_no_rope_layer_step = 4).
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

constexpr int64_t kLlamaCppNoRopeStep = 4;

void FromGguf(GgufKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kInterleaved;  // llama.cpp LLAMA_ROPE_TYPE_NORM (the converter permutes q/k rows)
  arch::ReadGgufShape(k, c);
  LayerSpec spec;
  arch::ReadGgufRope(k, c, notes, spec);
  if (spec.rope_params.original_max_position_embeddings) c.train_ctx = *spec.rope_params.original_max_position_embeddings;
  arch::SetLayers(c, spec);
  for (int64_t i = 0; i < c.n_layers; ++i) c.layers[static_cast<size_t>(i)].rope = (i + 1) % kLlamaCppNoRopeStep != 0;
  notes.Add(fmt::format("NoPE layers: llama.cpp's smollm3 rule, every {}th layer (no GGUF key states them)",
                        kLlamaCppNoRopeStep));
  arch::ReadGgufTensors(t, c, m);
}

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  if (k.Bool("mlp_bias", false)) throw ConfigError(fmt::format("{}: mlp_bias = true is not supported", k.source()));
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6, /*tie_default=*/true);
  c.attn_qkv_bias = c.attn_output_bias = k.Bool("attention_bias", false);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  arch::ReadHfQwenLayers(k, c, ropes, notes);
  const nlohmann::json* list = k.Get("no_rope_layers");
  const int64_t interval = k.OptSize("no_rope_layer_interval").value_or(kLlamaCppNoRopeStep);
  if (list != nullptr) {
    if (!list->is_array() || static_cast<int64_t>(list->size()) != c.n_layers) {
      throw ConfigError(fmt::format("{}: no_rope_layers must list num_hidden_layers = {} flags, got {}", k.source(),
                                    c.n_layers, list->dump()));
    }
    for (size_t i = 0; i < list->size(); ++i) {
      const nlohmann::json& e = (*list)[i];
      if (!e.is_number_integer() || (e != 0 && e != 1)) {
        throw ConfigError(fmt::format("{}: no_rope_layers[{}] must be 0 (NoPE) or 1 (RoPE), got {}", k.source(), i,
                                      e.dump()));
      }
      c.layers[i].rope = e == 1;
    }
  } else {
    for (int64_t i = 0; i < c.n_layers; ++i) c.layers[static_cast<size_t>(i)].rope = (i + 1) % interval != 0;
  }
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kSmolLm3Architecture{"smollm3", {"smollm3"}, {"SmolLM3ForCausalLM"}, {"smollm3"},
                                               FromGguf, FromHf};

}  // namespace posenc
