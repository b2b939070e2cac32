// mistral: Mistral 7B and its descendants as Hugging Face folders (MistralForCausalLM): a Llama block with
// sliding-window attention on every layer when config.json gives sliding_window (null: full attention).
// llama.cpp converts these files to GGUF "llama", which has no window (read by model/arch/llama.cc).
// Source: transformers models/mistral/modeling_mistral.py (sliding_window on every layer).
#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/model/arch/common.h"

namespace posenc {
namespace {

void FromHf(HfKeys& k, TensorSource& t, ModelConfig& c, ModelTensors& m, LoadNotes& notes) {
  c.rope_layout = RopeLayout::kHalfSplit;
  if (const std::optional<std::string> act = k.OptString("hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got \"{}\"", k.source(), *act));
  }
  arch::ReadHfShape(k, c, notes, "rms_norm_eps", 1e-6);
  const std::map<std::string, RopeParams> ropes = arch::ReadHfRope(k, notes);
  LayerSpec spec;
  spec.rope_params = arch::RopeFor(ropes, "full_attention", k.source());
  if (const std::optional<int64_t> w = k.OptSize("sliding_window")) {
    spec.type = "sliding_attention";
    spec.sliding_window = *w;
  }
  arch::SetLayers(c, spec);
  c.train_ctx = arch::HfTrainCtx(k, c);
  arch::ReadHfTensors(t, c, m, arch::HfNames{});
}

}  // namespace

extern const Architecture kMistralArchitecture{"mistral", {}, {"MistralForCausalLM"}, {"mistral"}, nullptr, FromHf};

}  // namespace posenc
