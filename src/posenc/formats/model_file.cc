#include "posenc/formats/model_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/formats/dequant.h"
#include "posenc/formats/llama2c.h"
#include "posenc/io/hf_config.h"

namespace posenc {
namespace {

// Hyperparameters above this are refused before any product is formed (sizes of real models are far below).
constexpr int64_t kMaxSize = int64_t{1} << 31;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t CheckSize(const std::string& source, const std::string& field, int64_t v) {
  if (v < 1 || v > kMaxSize) throw ConfigError(fmt::format("{}: {} must be in [1, 2^31], got {}", source, field, v));
  return v;
}

// Checks a tensor the model uses: its shape and that DequantizeRow can read its type.
void CheckTensor(const std::string& source, const TensorView& t, const std::vector<int64_t>& expected,
                 const char* meaning) {
  if (t.shape != expected) {
    throw ConfigError(fmt::format("{}: tensor '{}' has shape {}, expected {} ({})", source, t.name,
                                  ShapeText(t.shape), ShapeText(expected), meaning));
  }
  if (!CanDequantize(t.type)) {
    throw ConfigError(fmt::format("{}: tensor '{}' has type {}, which posenc cannot dequantize (f32, f16, bf16, "
                                  "q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl)",
                                  source, t.name, GgmlTypeName(t.type)));
  }
}

// Checks every tensor against the config (shapes in [out, in] order).
void CheckModelTensors(const std::string& source, const LlamaConfig& c, const ModelTensors& m) {
  CheckTensor(source, m.token_embd, {c.vocab_size, c.dim}, "vocab_size, dim");
  CheckTensor(source, m.output_norm, {c.dim}, "dim");
  if (m.output) CheckTensor(source, *m.output, {c.vocab_size, c.dim}, "vocab_size, dim");
  for (const LayerTensors& l : m.layers) {
    CheckTensor(source, l.attn_norm, {c.dim}, "dim");
    CheckTensor(source, l.wq, {c.q_dim(), c.dim}, "n_heads * head_dim, dim");
    CheckTensor(source, l.wk, {c.kv_dim(), c.dim}, "n_kv_heads * head_dim, dim");
    CheckTensor(source, l.wv, {c.kv_dim(), c.dim}, "n_kv_heads * head_dim, dim");
    CheckTensor(source, l.wo, {c.dim, c.q_dim()}, "dim, n_heads * head_dim");
    if (l.bq) CheckTensor(source, *l.bq, {c.q_dim()}, "n_heads * head_dim");
    if (l.bk) CheckTensor(source, *l.bk, {c.kv_dim()}, "n_kv_heads * head_dim");
    if (l.bv) CheckTensor(source, *l.bv, {c.kv_dim()}, "n_kv_heads * head_dim");
    if (l.bo) CheckTensor(source, *l.bo, {c.dim}, "dim");
    CheckTensor(source, l.ffn_norm, {c.dim}, "dim");
    CheckTensor(source, l.w1, {c.hidden_dim, c.dim}, "hidden_dim, dim");
    CheckTensor(source, l.w2, {c.dim, c.hidden_dim}, "dim, hidden_dim");
    CheckTensor(source, l.w3, {c.hidden_dim, c.dim}, "hidden_dim, dim");
  }
}

template <typename F>
void ForEachView(const ModelTensors& m, F f) {
  f(m.token_embd);
  f(m.output_norm);
  if (m.output) f(*m.output);
  for (const LayerTensors& l : m.layers) {
    for (const TensorView* t : {&l.attn_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.ffn_norm, &l.w1, &l.w2, &l.w3}) f(*t);
    for (const std::optional<TensorView>* t : {&l.bq, &l.bk, &l.bv, &l.bo}) {
      if (*t) f(**t);
    }
  }
}

// Warns about tensors of the file the model does not use.
void WarnUnused(ModelFile& mf, const std::vector<std::string>& all, const std::set<std::string>& also_used) {
  std::set<std::string> used = also_used;
  ForEachView(mf.tensors, [&](const TensorView& t) { used.insert(t.name); });
  std::vector<std::string> unused;
  for (const std::string& name : all) {
    if (!used.count(name)) unused.push_back(name);
  }
  if (unused.empty()) return;
  std::string list;
  for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
  mf.warnings.push_back(fmt::format("{} tensor(s) not used by the model: {}{}", unused.size(), list,
                                    unused.size() > 5 ? ", ..." : ""));
}

// ---- GGUF --------------------------------------------------------------------------------------------------------

TensorView GgufView(const GgufTensorInfo& t) {
  return TensorView{std::string(t.name), t.type, t.Shape(), t.data, static_cast<int64_t>(t.n_bytes)};
}

TensorView RequireGguf(const GgufFile& g, const std::string& name) { return GgufView(g.GetTensor(name)); }

std::optional<TensorView> OptionalGguf(const GgufFile& g, const std::string& name) {
  const GgufTensorInfo* t = g.FindTensor(name);
  return t ? std::optional<TensorView>(GgufView(*t)) : std::nullopt;
}

}  // namespace

ModelFile LoadGgufModel(const GgufFile& g) {
  const std::string& src = g.path();
  ModelFile mf;
  mf.path = src;
  mf.format = ModelFormat::kGguf;
  mf.format_detail = fmt::format("GGUF v{}", g.version());
  mf.files.push_back(g.file());
  LlamaConfig& c = mf.config;

  const std::string arch(g.GetString("general.architecture"));
  if (arch == "llama") {
    c.architecture = ModelArchitecture::kLlama;
    c.rope_layout = RopeLayout::kInterleaved;  // llama.cpp LLAMA_ROPE_TYPE_NORM
  } else if (arch == "qwen2") {
    c.architecture = ModelArchitecture::kQwen2;
    c.rope_layout = RopeLayout::kHalfSplit;  // llama.cpp LLAMA_ROPE_TYPE_NEOX
  } else {
    throw ConfigError(fmt::format("{}: general.architecture '{}' is not supported (llama, qwen2)", src, arch));
  }
  auto key = [&](const char* k) { return arch + "." + k; };
  auto size_key = [&](const char* k) { return CheckSize(src, key(k), g.GetInt64(key(k))); };
  c.dim = size_key("embedding_length");
  c.hidden_dim = size_key("feed_forward_length");
  c.n_layers = size_key("block_count");
  c.n_heads = size_key("attention.head_count");
  c.n_kv_heads = g.Has(key("attention.head_count_kv")) ? size_key("attention.head_count_kv") : c.n_heads;
  if (g.Has(key("attention.key_length"))) {
    c.head_dim = size_key("attention.key_length");
  } else {
    if (c.dim % c.n_heads != 0) {
      throw ConfigError(fmt::format("{}: {} = {} is not a multiple of {} = {} and {} is absent", src,
                                    key("embedding_length"), c.dim, key("attention.head_count"), c.n_heads,
                                    key("attention.key_length")));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  if (g.Has(key("attention.value_length")) && g.GetInt64(key("attention.value_length")) != c.head_dim) {
    throw ConfigError(fmt::format("{}: {} = {} differs from the key length {}: not supported", src,
                                  key("attention.value_length"), g.GetInt64(key("attention.value_length")),
                                  c.head_dim));
  }
  c.rms_norm_eps = g.GetFloat(key("attention.layer_norm_rms_epsilon"));

  RopeParams& p = c.rope;
  p.head_dim = c.head_dim;
  p.rotary_dim = g.Has(key("rope.dimension_count")) ? size_key("rope.dimension_count") : c.head_dim;
  if (std::optional<double> base = g.FindFloat(key("rope.freq_base"))) {
    p.rope_theta = *base;
  } else {
    p.rope_theta = 10000.0;
    mf.warnings.push_back(fmt::format("{} absent: using 10000 (llama.cpp's default)", key("rope.freq_base")));
  }
  const int64_t context_length = size_key("context_length");
  p.max_position_embeddings = context_length;
  const std::optional<std::string_view> scaling = g.FindString(key("rope.scaling.type"));
  const std::optional<double> factor = g.FindFloat(key("rope.scaling.factor"));
  std::optional<int64_t> original;
  if (g.Has(key("rope.scaling.original_context_length"))) original = size_key("rope.scaling.original_context_length");
  if (!scaling || *scaling == "none") {
    p.rope_type = RopeType::kDefault;
    if (const std::optional<double> linear = g.FindFloat(key("rope.scale_linear")); linear && *linear != 1.0) {
      p.rope_type = RopeType::kLinear;  // the pre-2023 spelling of linear scaling
      p.factor = *linear;
    }
  } else if (*scaling == "linear") {
    p.rope_type = RopeType::kLinear;
    p.factor = factor;
  } else if (*scaling == "yarn") {
    p.rope_type = RopeType::kYarn;
    p.factor = factor;
    p.original_max_position_embeddings = original.value_or(context_length);
  } else {
    throw ConfigError(fmt::format("{}: {} = '{}' is not supported (none, linear, yarn)", src,
                                  key("rope.scaling.type"), *scaling));
  }
  c.rope_scaling_attn_factor = g.FindFloat(key("rope.scaling.attn_factor"));
  c.train_ctx = original.value_or(context_length);

  // Tensors (llama.cpp names).
  ModelTensors& m = mf.tensors;
  m.token_embd = RequireGguf(g, "token_embd.weight");
  m.output_norm = RequireGguf(g, "output_norm.weight");
  m.output = OptionalGguf(g, "output.weight");
  c.tied_embeddings = !m.output.has_value();
  c.vocab_size = m.token_embd.shape.size() == 2 ? m.token_embd.shape[0] : 0;
  if (g.Has(key("vocab_size")) && g.GetInt64(key("vocab_size")) != c.vocab_size) {
    throw ConfigError(fmt::format("{}: {} = {} but token_embd.weight has {} rows", src, key("vocab_size"),
                                  g.GetInt64(key("vocab_size")), c.vocab_size));
  }
  c.attn_qkv_bias = c.architecture == ModelArchitecture::kQwen2 || g.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.attn_output_bias = g.FindTensor("blk.0.attn_output.bias") != nullptr;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("blk.{}.", i);
    LayerTensors l;
    l.attn_norm = RequireGguf(g, b + "attn_norm.weight");
    l.wq = RequireGguf(g, b + "attn_q.weight");
    l.wk = RequireGguf(g, b + "attn_k.weight");
    l.wv = RequireGguf(g, b + "attn_v.weight");
    l.wo = RequireGguf(g, b + "attn_output.weight");
    if (c.attn_qkv_bias) {
      l.bq = RequireGguf(g, b + "attn_q.bias");
      l.bk = RequireGguf(g, b + "attn_k.bias");
      l.bv = RequireGguf(g, b + "attn_v.bias");
    }
    if (c.attn_output_bias) l.bo = RequireGguf(g, b + "attn_output.bias");
    l.ffn_norm = RequireGguf(g, b + "ffn_norm.weight");
    l.w1 = RequireGguf(g, b + "ffn_gate.weight");
    l.w2 = RequireGguf(g, b + "ffn_down.weight");
    l.w3 = RequireGguf(g, b + "ffn_up.weight");
    m.layers.push_back(std::move(l));
  }
  std::set<std::string> also_used;
  if (const GgufTensorInfo* ff = g.FindTensor("rope_freqs.weight")) {
    const TensorView t = GgufView(*ff);
    CheckTensor(src, t, {p.RotaryDim() / 2}, "rotary_dim / 2");
    c.rope_freq_factors.resize(static_cast<size_t>(t.n_elements()));
    DequantizeRow(t.type, t.data, c.rope_freq_factors.data(), t.n_elements());
    also_used.insert(t.name);
  }
  ValidateLlamaConfig(c, src);
  CheckModelTensors(src, c, m);
  std::vector<std::string> all;
  for (const GgufTensorInfo& t : g.tensors()) all.emplace_back(t.name);
  WarnUnused(mf, all, also_used);
  return mf;
}

// ---- Hugging Face ------------------------------------------------------------------------------------------------

namespace {

using nlohmann::json;

const json* JsonGet(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

int64_t JsonSize(const json& config, const char* key, const std::string& src) {
  const json* v = JsonGet(config, key);
  if (v == nullptr) throw ConfigError(fmt::format("{}: required key '{}' is missing", src, key));
  if (!v->is_number_integer()) throw ConfigError(fmt::format("{}: '{}' must be an integer, got {}", src, key, v->dump()));
  return CheckSize(src, key, v->get<int64_t>());
}

bool JsonBool(const json& config, const char* key, bool fallback, const std::string& src) {
  const json* v = JsonGet(config, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) throw ConfigError(fmt::format("{}: '{}' must be true or false, got {}", src, key, v->dump()));
  return v->get<bool>();
}

TensorView HfView(const SafetensorsTensor& t) {
  return TensorView{t.name, t.type, t.shape, t.data, static_cast<int64_t>(t.n_bytes())};
}

}  // namespace

ModelFile LoadHfModel(const HfCheckpoint& ck) {
  const std::string& src = ck.config_path;
  const json& cfg = ck.config;
  ModelFile mf;
  mf.path = ck.dir;
  mf.format = ModelFormat::kHuggingFace;
  mf.format_detail = fmt::format("HF safetensors ({} file{})", ck.shards.size(), ck.shards.size() == 1 ? "" : "s");
  for (const SafetensorsFile& s : ck.shards) mf.files.push_back(s.file());
  LlamaConfig& c = mf.config;

  // Architecture: architectures[0], else model_type.
  std::string arch_name;
  if (const json* archs = JsonGet(cfg, "architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      throw ConfigError(fmt::format("{}: 'architectures' must be a list of class names, got {}", src, archs->dump()));
    }
    arch_name = (*archs)[0].get<std::string>();
    if (arch_name == "LlamaForCausalLM" || arch_name == "MistralForCausalLM") {
      c.architecture = ModelArchitecture::kLlama;
    } else if (arch_name == "Qwen2ForCausalLM") {
      c.architecture = ModelArchitecture::kQwen2;
    } else {
      throw ConfigError(fmt::format("{}: architecture '{}' is not supported (LlamaForCausalLM, MistralForCausalLM, "
                                    "Qwen2ForCausalLM)", src, arch_name));
    }
  } else {
    const json* mt = JsonGet(cfg, "model_type");
    const std::string type = mt && mt->is_string() ? mt->get<std::string>() : "";
    if (type == "llama" || type == "mistral") c.architecture = ModelArchitecture::kLlama;
    else if (type == "qwen2") c.architecture = ModelArchitecture::kQwen2;
    else throw ConfigError(fmt::format("{}: neither 'architectures' nor a supported 'model_type' (llama, mistral, "
                                       "qwen2) is given, got model_type {}", src, mt ? mt->dump() : "absent"));
  }
  if (const json* act = JsonGet(cfg, "hidden_act"); act && *act != "silu") {
    throw ConfigError(fmt::format("{}: hidden_act must be \"silu\" (SwiGLU), got {}", src, act->dump()));
  }
  if (JsonBool(cfg, "mlp_bias", false, src)) {
    throw ConfigError(fmt::format("{}: mlp_bias = true is not supported", src));
  }
  c.dim = JsonSize(cfg, "hidden_size", src);
  c.hidden_dim = JsonSize(cfg, "intermediate_size", src);
  c.n_layers = JsonSize(cfg, "num_hidden_layers", src);
  c.n_heads = JsonSize(cfg, "num_attention_heads", src);
  c.n_kv_heads = JsonGet(cfg, "num_key_value_heads") ? JsonSize(cfg, "num_key_value_heads", src) : c.n_heads;
  const int64_t vocab_size = JsonSize(cfg, "vocab_size", src);
  const int64_t max_positions = JsonSize(cfg, "max_position_embeddings", src);
  if (const json* eps = JsonGet(cfg, "rms_norm_eps")) {
    if (!eps->is_number()) throw ConfigError(fmt::format("{}: 'rms_norm_eps' must be a number, got {}", src, eps->dump()));
    c.rms_norm_eps = eps->get<double>();
  } else {
    c.rms_norm_eps = 1e-6;
    mf.warnings.push_back("rms_norm_eps absent: using 1e-6 (the transformers config default)");
  }
  if (const json* sw = JsonGet(cfg, "sliding_window"); sw && sw->is_number_integer() &&
                                                         sw->get<int64_t>() < max_positions &&
                                                         JsonBool(cfg, "use_sliding_window", true, src)) {
    mf.warnings.push_back(fmt::format("sliding_window = {} is not applied: attention is full causal",
                                      sw->get<int64_t>()));
  }
  HfRopeConfig rope;
  try {
    rope = ParseHfRopeConfig(cfg);
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", src, e.what()));
  }
  for (const std::string& w : rope.warnings) mf.warnings.push_back(w);
  c.rope = rope.params;
  c.rope_layout = rope.layout;
  c.head_dim = c.rope.head_dim;
  CheckSize(src, "head_dim", c.head_dim);
  // L0: original_max_position_embeddings (top level, then inside rope_scaling), else max_position_embeddings.
  if (c.rope.original_max_position_embeddings) {
    c.train_ctx = *c.rope.original_max_position_embeddings;
  } else if (JsonGet(cfg, "original_max_position_embeddings")) {
    c.train_ctx = JsonSize(cfg, "original_max_position_embeddings", src);
  } else if (const json* rs = JsonGet(cfg, "rope_scaling"); rs && rs->is_object() &&
                                                              JsonGet(*rs, "original_max_position_embeddings")) {
    c.train_ctx = JsonSize(*rs, "original_max_position_embeddings", src + ": rope_scaling");
  } else {
    c.train_ctx = max_positions;
  }
  c.tied_embeddings = JsonBool(cfg, "tie_word_embeddings", false, src);
  if (c.architecture == ModelArchitecture::kQwen2) {
    c.attn_qkv_bias = true;  // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False
  } else {
    c.attn_qkv_bias = c.attn_output_bias = JsonBool(cfg, "attention_bias", false, src);
  }

  auto require = [&](const std::string& name) {
    const SafetensorsTensor* t = ck.FindTensor(name);
    if (t == nullptr) throw ConfigError(fmt::format("{}: required tensor '{}' is missing", ck.dir, name));
    return HfView(*t);
  };
  ModelTensors& m = mf.tensors;
  m.token_embd = require("model.embed_tokens.weight");
  m.output_norm = require("model.norm.weight");
  if (!c.tied_embeddings) m.output = require("lm_head.weight");
  c.vocab_size = vocab_size;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string b = fmt::format("model.layers.{}.", i);
    LayerTensors l;
    l.attn_norm = require(b + "input_layernorm.weight");
    l.wq = require(b + "self_attn.q_proj.weight");
    l.wk = require(b + "self_attn.k_proj.weight");
    l.wv = require(b + "self_attn.v_proj.weight");
    l.wo = require(b + "self_attn.o_proj.weight");
    if (c.attn_qkv_bias) {
      l.bq = require(b + "self_attn.q_proj.bias");
      l.bk = require(b + "self_attn.k_proj.bias");
      l.bv = require(b + "self_attn.v_proj.bias");
    }
    if (c.attn_output_bias) l.bo = require(b + "self_attn.o_proj.bias");
    l.ffn_norm = require(b + "post_attention_layernorm.weight");
    l.w1 = require(b + "mlp.gate_proj.weight");
    l.w2 = require(b + "mlp.down_proj.weight");
    l.w3 = require(b + "mlp.up_proj.weight");
    m.layers.push_back(std::move(l));
  }
  ValidateLlamaConfig(c, src);
  CheckModelTensors(ck.dir, c, m);
  WarnUnused(mf, ck.TensorNames(), {});
  return mf;
}

// ---- llama2.c ----------------------------------------------------------------------------------------------------

ModelFile LoadLlama2cModel(std::shared_ptr<const MappedFile> file) {
  const std::string& src = file->path();
  ModelConfig h;
  try {
    h = ParseCheckpointHeader(file->bytes(), static_cast<int64_t>(file->size()));
  } catch (const IoError& e) {
    throw IoError(fmt::format("{}: {}", src, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("{}: {}", src, e.what()));
  }
  ModelFile mf;
  mf.path = src;
  mf.format = ModelFormat::kLlama2c;
  mf.format_detail = "llama2.c";
  mf.files.push_back(file);
  LlamaConfig& c = mf.config;
  c.architecture = ModelArchitecture::kLlama;
  c.dim = h.dim;
  c.hidden_dim = h.hidden_dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.head_dim();
  c.vocab_size = h.vocab_size;
  c.rms_norm_eps = 1e-5;  // run.c rmsnorm
  c.rope.head_dim = c.head_dim;
  c.rope.rotary_dim = c.head_dim;
  c.rope.rope_theta = 10000.0;  // run.c: powf(10000.0f, head_dim / (float)head_size)
  c.rope.max_position_embeddings = h.seq_len;
  c.rope_layout = RopeLayout::kInterleaved;
  c.train_ctx = h.seq_len;
  c.tied_embeddings = h.shared_classifier;

  const CheckpointLayout o = CheckpointTensorOffsets(h);
  const uint8_t* base = file->data();
  auto view = [&](const std::string& name, int64_t offset, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return TensorView{name, GgmlType::kF32, std::move(shape), base + offset, n * 4};
  };
  const int64_t dim = c.dim, kv = c.kv_dim(), hid = c.hidden_dim;
  ModelTensors& m = mf.tensors;
  m.token_embd = view("token_embedding_table", o.token_embedding_table, {c.vocab_size, dim});
  m.output_norm = view("rms_final_weight", o.rms_final_weight, {dim});
  if (!h.shared_classifier) m.output = view("wcls", o.wcls, {c.vocab_size, dim});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string s = fmt::format("[{}]", i);
    LayerTensors l;
    l.attn_norm = view("rms_att_weight" + s, o.rms_att_weight + i * dim * 4, {dim});
    l.wq = view("wq" + s, o.wq + i * dim * dim * 4, {dim, dim});
    l.wk = view("wk" + s, o.wk + i * kv * dim * 4, {kv, dim});
    l.wv = view("wv" + s, o.wv + i * kv * dim * 4, {kv, dim});
    l.wo = view("wo" + s, o.wo + i * dim * dim * 4, {dim, dim});
    l.ffn_norm = view("rms_ffn_weight" + s, o.rms_ffn_weight + i * dim * 4, {dim});
    l.w1 = view("w1" + s, o.w1 + i * hid * dim * 4, {hid, dim});
    l.w2 = view("w2" + s, o.w2 + i * dim * hid * 4, {dim, hid});
    l.w3 = view("w3" + s, o.w3 + i * hid * dim * 4, {hid, dim});
    m.layers.push_back(std::move(l));
  }
  ValidateLlamaConfig(c, src);
  CheckModelTensors(src, c, m);
  return mf;
}

// ---- dispatch and summary ----------------------------------------------------------------------------------------

std::string_view ModelFormatName(ModelFormat format) {
  switch (format) {
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHuggingFace: return "hf";
    case ModelFormat::kLlama2c: return "llama2.c";
  }
  return "unknown";
}

ModelFormat DetectModelFormat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("cannot open model '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) return ModelFormat::kHuggingFace;
  const std::shared_ptr<const MappedFile> file = MappedFile::Open(path);  // refuses FIFOs, devices
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0) return ModelFormat::kGguf;
  return ModelFormat::kLlama2c;
}

ModelFile LoadModelFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("cannot open model '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) return LoadHfModel(OpenHfCheckpoint(path));
  std::shared_ptr<const MappedFile> file = MappedFile::Open(path);
  if (file->size() >= 4 && std::memcmp(file->data(), "GGUF", 4) == 0) {
    return LoadGgufModel(GgufFile::Parse(std::move(file)));
  }
  for (const char* suffix : {".safetensors", ".json"}) {
    const std::string_view p(path), s(suffix);
    if (p.size() >= s.size() && p.substr(p.size() - s.size()) == s) {
      throw IoError(fmt::format("'{}' is part of a Hugging Face checkpoint: give its folder (config.json and the "
                                "safetensors weights) as the model path",
                                path));
    }
  }
  return LoadLlama2cModel(std::move(file));
}

ModelFileSummary ModelFile::Summary() const {
  ModelFileSummary s;
  const LlamaConfig& c = config;
  s.format = format_detail;
  s.architecture = std::string(ArchitectureName(c.architecture));
  s.dim = c.dim;
  s.hidden_dim = c.hidden_dim;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.vocab_size = c.vocab_size;
  ForEachView(tensors, [&](const TensorView& t) { ++s.tensor_types[std::string(GgmlTypeName(t.type))]; });
  s.train_ctx = c.train_ctx;
  s.rope_theta = c.rope.rope_theta;
  s.rope_scaling = std::string(RopeTypeName(c.rope.rope_type));
  if (c.rope.rope_type == RopeType::kDefault) s.rope_scaling = "none";
  if (c.rope.factor) s.rope_scaling += fmt::format(" x{}", *c.rope.factor);
  if (!c.rope_freq_factors.empty()) s.rope_scaling += " + rope_freqs";
  if (c.rope.RotaryDim() != c.head_dim) s.rope_scaling += fmt::format(", rotary_dim {}", c.rope.RotaryDim());
  s.rope_layout = RopeLayoutName(c.rope_layout);
  return s;
}

std::string SummaryLine(const ModelFileSummary& s) {
  std::string types;
  for (const auto& [name, count] : s.tensor_types) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, count);
  return fmt::format("{} {}: dim {}, {} layers, {} heads x head_dim {}, {} kv heads, ffn {}, vocab {}; tensors {}; "
                     "L0 {}; RoPE base {}, scaling {}, {} rows",
                     s.format, s.architecture, s.dim, s.n_layers, s.n_heads, s.head_dim, s.n_kv_heads, s.hidden_dim,
                     s.vocab_size, types, s.train_ctx, s.rope_theta, s.rope_scaling, s.rope_layout);
}

}  // namespace posenc
