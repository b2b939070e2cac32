#include "posenc/model/arch/common.h"

#include <cmath>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/rope/hf_config.h"

namespace posenc::arch {
namespace {

using nlohmann::json;

std::string Layer(const std::string& pattern, int64_t i) { return fmt::format(fmt::runtime(pattern), i); }

// llama.cpp's get_mscale (llama-context.cpp): 0.1 m ln(s) + 1 for s > 1, else 1.
double YarnMscale(double s, double m) { return s <= 1.0 ? 1.0 : 0.1 * m * std::log(s) + 1.0; }

}  // namespace

// ---- GGUF ------------------------------------------------------------------------------------------------------

void ReadGgufShape(GgufKeys& k, ModelConfig& c) {
  c.dim = k.Size("embedding_length");
  c.hidden_dim = k.Size("feed_forward_length");
  c.n_layers = k.LayerCount("block_count");
  c.n_heads = k.Size("attention.head_count");
  c.n_kv_heads = k.Has("attention.head_count_kv") ? k.Size("attention.head_count_kv") : c.n_heads;
  if (k.Has("attention.key_length")) {
    c.head_dim = k.Size("attention.key_length");
  } else {
    if (c.dim % c.n_heads != 0) {
      throw ConfigError(fmt::format("{}: {} = {} is not a multiple of {} = {} and {} is absent", k.source(),
                                    k.Key("embedding_length"), c.dim, k.Key("attention.head_count"), c.n_heads,
                                    k.Key("attention.key_length")));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  if (const std::optional<int64_t> v = k.OptSize("attention.value_length"); v && *v != c.head_dim) {
    throw ConfigError(fmt::format("{}: {} = {} differs from the key length {}: not supported", k.source(),
                                  k.Key("attention.value_length"), *v, c.head_dim));
  }
  c.norm_eps = k.Float(c.norm == NormType::kRms ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon");
  c.train_ctx = k.Size("context_length");
}

void ReadGgufRope(GgufKeys& k, const ModelConfig& c, LoadNotes& notes, LayerSpec& spec, const char* freq_base_key,
                  bool scaled) {
  spec.rope = true;
  spec.rope_magnitude = 1.0;
  RopeParams& p = spec.rope_params;
  p = RopeParams();
  p.head_dim = c.head_dim;
  p.rotary_dim = k.Has("rope.dimension_count") ? k.Size("rope.dimension_count") : c.head_dim;
  if (std::optional<double> base = k.OptFloat(freq_base_key)) {
    p.rope_theta = *base;
  } else {
    p.rope_theta = 10000.0;
    notes.Add(fmt::format("{} absent: 10000 (llama.cpp's default)", k.Key(freq_base_key)));
  }
  const int64_t context_length = k.Size("context_length");
  p.max_position_embeddings = context_length;
  // llama.cpp reads every rope.scaling key for the model; layers it does not scale (sliding ones) use none.
  const std::optional<std::string> type = k.OptString("rope.scaling.type");
  std::optional<double> factor = k.OptFloat("rope.scaling.factor", /*allow_zero=*/true);
  if (!factor) factor = k.OptFloat("rope.scale_linear", /*allow_zero=*/true);
  const std::optional<int64_t> original = k.OptSize("rope.scaling.original_context_length");
  const std::optional<double> attn_factor = k.OptFloat("rope.scaling.attn_factor");
  const std::optional<double> beta_fast = k.OptFloat("rope.scaling.yarn_beta_fast");
  const std::optional<double> beta_slow = k.OptFloat("rope.scaling.yarn_beta_slow");
  const std::optional<double> ext_factor = k.OptFloat("rope.scaling.yarn_ext_factor", /*allow_zero=*/true);
  const std::optional<double> log_mul = k.OptFloat("rope.scaling.yarn_log_multiplier", /*allow_zero=*/true);
  if (const std::optional<bool> finetuned = k.OptBool("rope.scaling.finetuned")) {
    notes.Add(fmt::format("{} = {} (informational: it changes nothing at inference)", k.Key("rope.scaling.finetuned"),
                          *finetuned));
  }
  // llama.cpp: a factor of 0 (or none) means 1; the scaling type defaults to linear.
  const double s = factor && *factor != 0.0 ? *factor : 1.0;
  if (s < 1.0) {
    throw ConfigError(fmt::format("{}: {} must be >= 1 (or 0 for none), got {}", k.source(),
                                  k.Key("rope.scaling.factor"), s));
  }
  const std::string t = type.value_or("linear");
  if (t != "none" && t != "linear" && t != "yarn" && t != "longrope") {
    throw ConfigError(fmt::format("{}: {} = '{}' is not one llama.cpp defines (none, linear, yarn, longrope)",
                                  k.source(), k.Key("rope.scaling.type"), t));
  }
  const bool yarn = t == "yarn";
  if (!yarn && (beta_fast || beta_slow || ext_factor || log_mul)) {
    throw ConfigError(fmt::format("{}: rope.scaling.yarn_* keys are given but {} is '{}': llama.cpp uses them only "
                                  "for yarn", k.source(), k.Key("rope.scaling.type"), t));
  }
  if (!scaled || t == "none" || (t == "linear" && s == 1.0)) {
    p.rope_type = RopeType::kDefault;
  } else if (t == "linear") {
    p.rope_type = RopeType::kLinear;
    p.factor = s;
  } else if (t == "longrope") {
    p.rope_type = RopeType::kLongrope;  // factors: the architecture file reads rope_factors_long/short
    p.original_max_position_embeddings = original.value_or(context_length);
    if (factor) p.factor = s;
  } else {
    const double ext = ext_factor.value_or(1.0);
    if (ext != 0.0 && ext != 1.0) {
      throw ConfigError(fmt::format("{}: {} = {} is not supported (0: linear interpolation, 1: YaRN's ramp)",
                                    k.source(), k.Key("rope.scaling.yarn_ext_factor"), ext));
    }
    if (ext == 0.0) {
      // ggml rope_yarn with ext_factor 0: theta = theta / s, no ramp, magnitude attn_factor alone.
      p.rope_type = s == 1.0 ? RopeType::kDefault : RopeType::kLinear;
      if (s != 1.0) p.factor = s;
    } else {
      p.rope_type = RopeType::kYarn;
      p.factor = s;
      p.original_max_position_embeddings = original.value_or(context_length);
      p.beta_fast = beta_fast;
      p.beta_slow = beta_slow;
      // The magnitude of cos and sin: llama-context.cpp's yarn_attn_factor times ggml's (1 + 0.1 ln s), i.e.
      // attn_factor * mscale(s, 1), or with yarn_log_multiplier m: attn_factor * mscale(s, 1) / mscale(s, m).
      const double magnitude =
          (log_mul && *log_mul != 0.0 ? YarnMscale(s, 1.0) / YarnMscale(s, *log_mul) : YarnMscale(s, 1.0));
      p.attention_factor = magnitude * attn_factor.value_or(1.0);
      return;
    }
  }
  if (!scaled || !attn_factor) return;
  // llama.cpp multiplies cos and sin by it (ggml_rope_ext's attn_factor).
  if (p.rope_type == RopeType::kLongrope) {
    p.attention_factor = *attn_factor;
  } else {
    spec.rope_magnitude = *attn_factor;
  }
}

namespace {

std::vector<float> FactorTensor(GgufKeys& k, TensorSource& t, ModelTensors& m, const std::string& name,
                                int64_t rotary_dim) {
  const TensorView v = t.Require(name);
  if (v.shape != std::vector<int64_t>{rotary_dim / 2} || !CanDequantize(v.type)) {
    std::string shape;
    for (int64_t d : v.shape) shape += (shape.empty() ? "" : ", ") + std::to_string(d);
    throw ConfigError(fmt::format("{}: tensor '{}' has shape [{}] and type {}, expected [{}] (rotary_dim / 2) of "
                                  "a float type", k.source(), name, shape, GgmlTypeName(v.type), rotary_dim / 2));
  }
  std::vector<float> f(static_cast<size_t>(v.n_elements()));
  DequantizeRow(v.type, v.data, f.data(), v.n_elements());
  for (size_t i = 0; i < f.size(); ++i) {
    if (!std::isfinite(f[i]) || f[i] <= 0) {
      throw ConfigError(fmt::format("{}: {}[{}] must be finite and > 0, got {}", k.source(), name, i, f[i]));
    }
  }
  m.also_used.push_back(name);
  return f;
}

}  // namespace

void ReadGgufRopeFactors(GgufKeys& k, TensorSource& t, ModelTensors& m, LayerSpec& spec) {
  RopeParams& p = spec.rope_params;
  const int64_t rd = p.RotaryDim();
  if (t.Has("rope_freqs.weight")) spec.rope_freq_factors = FactorTensor(k, t, m, "rope_freqs.weight", rd);
  const bool has_long = t.Has("rope_factors_long.weight"), has_short = t.Has("rope_factors_short.weight");
  if (!has_long && !has_short) {
    if (p.rope_type == RopeType::kLongrope) {
      throw ConfigError(fmt::format("{}: {} = 'longrope' needs the tensors rope_factors_long.weight and "
                                    "rope_factors_short.weight", k.source(), k.Key("rope.scaling.type")));
    }
    return;
  }
  if (p.rope_type != RopeType::kLongrope) {  // llama.cpp applies the factors whatever the scaling type says
    p.rope_type = RopeType::kLongrope;
    // llama.cpp's n_ctx_orig_yarn: rope.scaling.original_context_length, else context_length.
    p.original_max_position_embeddings =
        k.OptSize("rope.scaling.original_context_length").value_or(p.max_position_embeddings);
    p.factor.reset();
    if (spec.rope_magnitude != 1.0) p.attention_factor = spec.rope_magnitude;
    spec.rope_magnitude = 1.0;
  }
  const std::vector<float> lf = FactorTensor(k, t, m, "rope_factors_long.weight", rd);
  const std::vector<float> sf = FactorTensor(k, t, m, "rope_factors_short.weight", rd);
  p.long_factor.assign(lf.begin(), lf.end());
  p.short_factor.assign(sf.begin(), sf.end());
}

void SetLayers(ModelConfig& c, const LayerSpec& spec) { c.layers.assign(static_cast<size_t>(c.n_layers), spec); }

std::optional<int64_t> GgufSlidingWindow(GgufKeys& k) { return k.OptSize("attention.sliding_window"); }

void ReadGgufTensors(TensorSource& src, ModelConfig& c, ModelTensors& m) {
  const bool layer_norm = c.norm == NormType::kLayer;
  auto norm = [&](const std::string& base) {
    NormTensors n;
    n.weight = src.Require(base + ".weight");
    if (layer_norm) n.bias = src.Require(base + ".bias");
    return n;
  };
  m.token_embd = src.Require("token_embd.weight");
  if (c.absolute_positions == AbsolutePositions::kLearned) m.position_embd = src.Require("position_embd.weight");
  m.output_norm = norm("output_norm");
  m.output = src.Optional("output.weight");
  c.tied_embeddings = !m.output.has_value();
  c.vocab_size = m.token_embd.shape.size() == 2 ? m.token_embd.shape[0] : 0;
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    LayerTensors l;
    if (c.attn_pre_norm) l.attn_norm = norm(b + "attn_norm");
    if (src.Has(b + "attn_qkv.weight")) {  // fused: rows [Q; K; V] (llama.cpp's views at 0, q_dim, q_dim + kv_dim)
      const TensorView qkv = src.Require(b + "attn_qkv.weight");
      l.wq = SliceRows(qkv, 0, q, "q");
      l.wk = SliceRows(qkv, q, kv, "k");
      l.wv = SliceRows(qkv, q + kv, kv, "v");
      if (c.attn_qkv_bias) {
        const TensorView bias = src.Require(b + "attn_qkv.bias");
        l.bq = SliceVector(bias, 0, q, "q");
        l.bk = SliceVector(bias, q, kv, "k");
        l.bv = SliceVector(bias, q + kv, kv, "v");
      }
    } else {
      l.wq = src.Require(b + "attn_q.weight");
      l.wk = src.Require(b + "attn_k.weight");
      l.wv = src.Require(b + "attn_v.weight");
      if (c.attn_qkv_bias) {
        l.bq = src.Require(b + "attn_q.bias");
        l.bk = src.Require(b + "attn_k.bias");
        l.bv = src.Require(b + "attn_v.bias");
      }
    }
    if (c.qk_norm != QkNorm::kNone) {
      l.q_norm = NormTensors{src.Require(b + "attn_q_norm.weight"), std::nullopt, false};
      l.k_norm = NormTensors{src.Require(b + "attn_k_norm.weight"), std::nullopt, false};
    }
    l.wo = src.Require(b + "attn_output.weight");
    if (c.attn_output_bias) l.bo = src.Require(b + "attn_output.bias");
    if (c.attn_post_norm) l.attn_post_norm = norm(b + "post_attention_norm");
    if (c.ffn_pre_norm) l.ffn_norm = norm(b + "ffn_norm");
    if (c.gated_ffn) l.w_gate = src.Require(b + "ffn_gate.weight");
    l.w_up = src.Require(b + "ffn_up.weight");
    l.w_down = src.Require(b + "ffn_down.weight");
    if (c.ffn_bias) {
      l.b_up = src.Require(b + "ffn_up.bias");
      l.b_down = src.Require(b + "ffn_down.bias");
    }
    if (c.ffn_post_norm) l.ffn_post_norm = norm(b + "post_ffw_norm");
    m.layers.push_back(std::move(l));
  }
}

// ---- Hugging Face ----------------------------------------------------------------------------------------------

void ReadHfShape(HfKeys& k, ModelConfig& c, LoadNotes& notes, const char* eps_key, double eps_default,
                 bool tie_default) {
  c.dim = k.Size("hidden_size");
  c.hidden_dim = k.Size("intermediate_size");
  c.n_layers = k.LayerCount("num_hidden_layers");
  c.n_heads = k.Size("num_attention_heads");
  c.n_kv_heads = k.Has("num_key_value_heads") && k.Get("num_key_value_heads") ? k.Size("num_key_value_heads")
                                                                               : c.n_heads;
  c.vocab_size = k.Size("vocab_size");
  if (k.Get("head_dim") != nullptr) {
    c.head_dim = k.Size("head_dim");
  } else {
    if (c.dim % c.n_heads != 0) {
      throw ConfigError(fmt::format("{}: hidden_size = {} is not a multiple of num_attention_heads = {} and head_dim "
                                    "is not given", k.source(), c.dim, c.n_heads));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  if (const std::optional<double> eps = k.OptFloat(eps_key)) {
    c.norm_eps = *eps;
  } else {
    c.norm_eps = eps_default;
    notes.Add(fmt::format("{} absent: {} (the transformers config default)", eps_key, eps_default));
  }
  c.tied_embeddings = k.Bool("tie_word_embeddings", tie_default);
}

std::map<std::string, RopeParams> ReadHfRope(HfKeys& k, LoadNotes& notes) {
  for (const char* key : {"rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor", "rotary_pct",
                          "rotary_dim", "rotary_emb_base", "head_dim", "max_position_embeddings",
                          "original_max_position_embeddings", "rope_interleave"}) {
    k.MarkRead(key);
  }
  auto parse = [&](const std::optional<std::string>& type) {
    HfRopeConfig r;
    try {
      r = ParseHfRopeConfig(k.config(), type);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("{}: {}", k.source(), e.what()));
    }
    for (const std::string& w : r.warnings) {
      // A key the rope type does not use would be ignored: refused, as everything the reader does not apply.
      if (w.find("is not used by rope_type") != std::string::npos) {
        throw ConfigError(fmt::format("{}: {}", k.source(), w));
      }
      notes.Add(w);
    }
    return r.params;
  };
  std::map<std::string, RopeParams> out;
  const std::vector<std::string> types = NestedRopeLayerTypes(k.config());
  if (types.empty()) {
    out[""] = parse(std::nullopt);
  } else {
    for (const std::string& t : types) out[t] = parse(t);
  }
  return out;
}

const RopeParams& RopeFor(const std::map<std::string, RopeParams>& ropes, const std::string& type,
                          const std::string& source) {
  if (auto it = ropes.find(type); it != ropes.end()) return it->second;
  if (auto it = ropes.find(""); it != ropes.end()) return it->second;
  throw ConfigError(fmt::format("{}: rope_parameters has no entry for layer type '{}'", source, type));
}

std::optional<std::vector<std::string>> ReadHfLayerTypes(HfKeys& k, int64_t n_layers) {
  const json* v = k.Get("layer_types");
  if (v == nullptr) return std::nullopt;
  if (!v->is_array() || static_cast<int64_t>(v->size()) != n_layers) {
    throw ConfigError(fmt::format("{}: layer_types must list num_hidden_layers = {} layer types, got {}", k.source(),
                                  n_layers, v->dump()));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string() || (e != "full_attention" && e != "sliding_attention")) {
      throw ConfigError(fmt::format("{}: layer_types[{}] must be \"full_attention\" or \"sliding_attention\", got {}",
                                    k.source(), i, e.dump()));
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

void ReadHfQwenLayers(HfKeys& k, ModelConfig& c, const std::map<std::string, RopeParams>& ropes,
                      LoadNotes& notes) {
  const bool use_window = k.Bool("use_sliding_window", false);
  const std::optional<int64_t> window = k.OptSize("sliding_window");
  const std::optional<int64_t> max_window_layers = k.OptCount("max_window_layers");
  std::optional<std::vector<std::string>> types = arch::ReadHfLayerTypes(k, c.n_layers);
  if (!types) {
    types.emplace();
    for (int64_t i = 0; i < c.n_layers; ++i) {
      const bool sliding = use_window && window && i >= max_window_layers.value_or(0);
      types->push_back(sliding ? "sliding_attention" : "full_attention");
    }
  }
  for (int64_t i = 0; i < c.n_layers; ++i) {
    LayerSpec spec;
    spec.type = (*types)[static_cast<size_t>(i)];
    spec.rope_params = arch::RopeFor(ropes, spec.type, k.source());
    if (spec.type == "sliding_attention") {
      if (!use_window || !window) {
        // Qwen2Config sets sliding_window to None without use_sliding_window: transformers attends fully.
        notes.Add(fmt::format("layer_types[{}] is sliding_attention but use_sliding_window is false or sliding_window "
                              "is not given: full attention, as transformers runs it", i));
      } else {
        spec.sliding_window = *window;
      }
    }
    c.layers.push_back(spec);
  }
}

void ReadHfDualChunk(HfKeys& k, ModelConfig& c, LoadNotes& notes) {
  const nlohmann::json* d = k.Get("dual_chunk_attention_config");
  if (d == nullptr) return;
  const std::string where = fmt::format("{}: dual_chunk_attention_config", k.source());
  if (!d->is_object()) throw ConfigError(fmt::format("{} must be an object, got {}", where, d->dump()));
  HfKeys sub(*d, where, 0);
  DualChunkConfig dc;
  dc.chunk_size = sub.Size("chunk_size");
  const std::optional<int64_t> local = sub.OptCount("local_size");
  if (!local) throw ConfigError(fmt::format("{}: required key 'local_size' is missing", where));
  dc.local_size = *local;
  dc.original_max_position_embeddings = sub.OptSize("original_max_position_embeddings");
  std::vector<std::string> sparse;
  for (const auto& [key, value] : d->items()) {
    if (key == "chunk_size" || key == "local_size" || key == "original_max_position_embeddings") continue;
    if (key.rfind("sparse_attention_", 0) != 0) {
      throw ConfigError(fmt::format("{}: unknown key '{}' = {}", where, key, value.dump()));
    }
    sparse.push_back(key);
  }
  if (!sparse.empty()) {
    std::string list;
    for (const std::string& key : sparse) list += (list.empty() ? "" : ", ") + key;
    notes.Add(fmt::format("dual_chunk_attention_config {} (sparse prefill) not applied: dca attends densely", list));
  }
  notes.Add(fmt::format("dual_chunk_attention_config (chunk_size {}, local_size {}): the defaults of the dca method; "
                        "native runs without it, as transformers does", dc.chunk_size, dc.local_size));
  c.dual_chunk = dc;
}

int64_t HfTrainCtx(HfKeys& k, const ModelConfig& c) {
  const LayerSpec* primary = PrimaryRopeLayer(c);
  if (primary != nullptr && primary->rope_params.original_max_position_embeddings) {
    return *primary->rope_params.original_max_position_embeddings;
  }
  // A top-level original_max_position_embeddings states the training length even where the rope type does not
  // read it (transformers' yarn reads only the nested key): it is L0 of the methods.
  if (k.Has("original_max_position_embeddings")) return k.Size("original_max_position_embeddings");
  return k.Size("max_position_embeddings");
}

HfNames GemmaHfNames() {
  HfNames n;
  n.attn_post_norm = "post_attention_layernorm";
  n.ffn_norm = "pre_feedforward_layernorm";
  n.ffn_post_norm = "post_feedforward_layernorm";
  return n;
}

void SetGemmaBlock(ModelConfig& c) {
  c.rope_layout = RopeLayout::kHalfSplit;  // HF rotate_half; llama.cpp LLAMA_ROPE_TYPE_NEOX
  c.attn_post_norm = c.ffn_post_norm = true;
  c.activation = Activation::kGeluTanh;
  c.gated_ffn = true;
  // Gemma2Model: hidden_states * normalizer, normalizer = hidden_size**0.5 in the hidden dtype; llama.cpp
  // ggml_scale(inpL, sqrtf(n_embd)). Both float32 here.
  c.embedding_scale = static_cast<double>(std::sqrt(static_cast<float>(c.dim)));
}

void CheckGemmaActivation(HfKeys& k) {
  std::optional<std::string> act = k.OptString("hidden_activation");
  if (!act) act = k.OptString("hidden_act");
  k.MarkRead("hidden_act");
  if (act && *act != "gelu_pytorch_tanh" && *act != "gelu_new") {
    throw ConfigError(fmt::format("{}: hidden_activation must be \"gelu_pytorch_tanh\" (GeGLU), got \"{}\"",
                                  k.source(), *act));
  }
}

double GgufGemmaQueryScalar(const ModelConfig& c, int64_t big_layers) {
  return c.n_layers == big_layers ? static_cast<double>(c.dim / c.n_heads) : static_cast<double>(c.head_dim);
}

void ReadHfTensors(TensorSource& src, const ModelConfig& c, ModelTensors& m, const HfNames& n, bool norm_plus_one) {
  const bool layer_norm = c.norm == NormType::kLayer;
  auto norm = [&](const std::string& base) {
    NormTensors t;
    t.weight = src.Require(base + ".weight");
    if (layer_norm) t.bias = src.Require(base + ".bias");
    t.plus_one = norm_plus_one;
    return t;
  };
  m.token_embd = src.Require(n.embed);
  m.output_norm = norm(n.norm);
  if (!c.tied_embeddings) m.output = src.Require(n.lm_head);
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = Layer(n.layer, i);
    LayerTensors l;
    if (c.attn_pre_norm) l.attn_norm = norm(b + n.attn_norm);
    l.wq = src.Require(b + n.q + ".weight");
    l.wk = src.Require(b + n.k + ".weight");
    l.wv = src.Require(b + n.v + ".weight");
    if (c.attn_qkv_bias) {
      l.bq = src.Require(b + n.q + ".bias");
      l.bk = src.Require(b + n.k + ".bias");
      l.bv = src.Require(b + n.v + ".bias");
    }
    if (c.qk_norm != QkNorm::kNone) {
      l.q_norm = NormTensors{src.Require(b + n.q_norm + ".weight"), std::nullopt, norm_plus_one};
      l.k_norm = NormTensors{src.Require(b + n.k_norm + ".weight"), std::nullopt, norm_plus_one};
    }
    l.wo = src.Require(b + n.o + ".weight");
    if (c.attn_output_bias) l.bo = src.Require(b + n.o + ".bias");
    if (c.attn_post_norm) l.attn_post_norm = norm(b + n.attn_post_norm);
    if (c.ffn_pre_norm) l.ffn_norm = norm(b + n.ffn_norm);
    if (c.gated_ffn) l.w_gate = src.Require(b + n.gate + ".weight");
    l.w_up = src.Require(b + n.up + ".weight");
    l.w_down = src.Require(b + n.down + ".weight");
    if (c.ffn_bias) {
      l.b_up = src.Require(b + n.up + ".bias");
      l.b_down = src.Require(b + n.down + ".bias");
    }
    if (c.ffn_post_norm) l.ffn_post_norm = norm(b + n.ffn_post_norm);
    m.layers.push_back(std::move(l));
  }
}

}  // namespace posenc::arch
