#include "posenc/model/loader.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/llama2c.h"
#include "posenc/model/arch/arch.h"

namespace posenc {
namespace {

using nlohmann::json;

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string SupportedList(bool hf) {
  std::string s;
  for (const Architecture* a : Architectures()) {
    const auto& names = hf ? a->hf_classes : a->gguf_names;
    for (std::string_view n : names) s += (s.empty() ? "" : ", ") + std::string(n);
  }
  return s;
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

void CheckNorm(const std::string& source, const std::optional<NormTensors>& n, bool expected, int64_t width,
               const char* meaning, const char* part) {
  if (n.has_value() != expected) {
    throw ConfigError(fmt::format("{}: the model {} a {} norm but the architecture gave {}", source,
                                  expected ? "needs" : "has no", part, n ? "one" : "none"));
  }
  if (!n) return;
  CheckTensor(source, n->weight, {width}, meaning);
  if (n->bias) CheckTensor(source, *n->bias, {width}, meaning);
}

// Every tensor against the config (shapes in [out, in] order), every part present exactly when the config says.
void CheckModelTensors(const std::string& source, const ModelConfig& c, const ModelTensors& m) {
  CheckTensor(source, m.token_embd, {c.vocab_size, c.dim}, "vocab_size, dim");
  if (c.absolute_positions == AbsolutePositions::kLearned) {
    if (!m.position_embd) throw ConfigError(fmt::format("{}: learned positions need a position table", source));
    CheckTensor(source, *m.position_embd, {c.n_positions, c.dim}, "n_positions, dim");
  }
  CheckTensor(source, m.output_norm.weight, {c.dim}, "dim");
  if (m.output_norm.bias) CheckTensor(source, *m.output_norm.bias, {c.dim}, "dim");
  if (m.output) CheckTensor(source, *m.output, {c.vocab_size, c.dim}, "vocab_size, dim");
  if (static_cast<int64_t>(m.layers.size()) != c.n_layers) {
    throw ConfigError(fmt::format("{}: {} layers of tensors for n_layers = {}", source, m.layers.size(), c.n_layers));
  }
  const int64_t q = c.q_dim(), kv = c.kv_dim();
  const int64_t qn = c.qk_norm == QkNorm::kWhole ? q : c.head_dim, kn = c.qk_norm == QkNorm::kWhole ? kv : c.head_dim;
  for (const LayerTensors& l : m.layers) {
    CheckNorm(source, l.attn_norm, c.attn_pre_norm, c.dim, "dim", "pre-attention");
    CheckTensor(source, l.wq, {q, c.dim}, "n_heads * head_dim, dim");
    CheckTensor(source, l.wk, {kv, c.dim}, "n_kv_heads * head_dim, dim");
    CheckTensor(source, l.wv, {kv, c.dim}, "n_kv_heads * head_dim, dim");
    if (l.bq) CheckTensor(source, *l.bq, {q}, "n_heads * head_dim");
    if (l.bk) CheckTensor(source, *l.bk, {kv}, "n_kv_heads * head_dim");
    if (l.bv) CheckTensor(source, *l.bv, {kv}, "n_kv_heads * head_dim");
    CheckNorm(source, l.q_norm, c.qk_norm != QkNorm::kNone, qn, "head_dim or q_dim", "query");
    CheckNorm(source, l.k_norm, c.qk_norm != QkNorm::kNone, kn, "head_dim or kv_dim", "key");
    CheckTensor(source, l.wo, {c.dim, q}, "dim, n_heads * head_dim");
    if (l.bo) CheckTensor(source, *l.bo, {c.dim}, "dim");
    CheckNorm(source, l.attn_post_norm, c.attn_post_norm, c.dim, "dim", "post-attention");
    CheckNorm(source, l.ffn_norm, c.ffn_pre_norm, c.dim, "dim", "pre-feed-forward");
    if (l.w_gate.has_value() != c.gated_ffn) {
      throw ConfigError(fmt::format("{}: the feed-forward {} a gate projection", source, c.gated_ffn ? "needs" : "has no"));
    }
    if (l.w_gate) CheckTensor(source, *l.w_gate, {c.hidden_dim, c.dim}, "hidden_dim, dim");
    CheckTensor(source, l.w_up, {c.hidden_dim, c.dim}, "hidden_dim, dim");
    if (l.b_up) CheckTensor(source, *l.b_up, {c.hidden_dim}, "hidden_dim");
    CheckTensor(source, l.w_down, {c.dim, c.hidden_dim}, "dim, hidden_dim");
    if (l.b_down) CheckTensor(source, *l.b_down, {c.dim}, "dim");
    CheckNorm(source, l.ffn_post_norm, c.ffn_post_norm, c.dim, "dim", "post-feed-forward");
  }
}

// Tensors of layers the config does not have are named as such (block_count smaller than the layers held), the
// rest listed; either is an error unless allowed.
void CheckUnused(ModelFile& mf, const TensorSource& src, const LoadOptions& options, const char* count_key) {
  const std::vector<std::string> unused = src.Unused();
  if (unused.empty()) return;
  int64_t max_layer = -1;
  static const std::regex layer_re(R"((?:^|\.)(?:blk|layers|h)\.(\d+)\.)");
  for (const std::string& n : unused) {
    std::smatch m;
    if (std::regex_search(n, m, layer_re)) max_layer = std::max<int64_t>(max_layer, std::stoll(m[1].str()));
  }
  std::string list;
  for (size_t i = 0; i < unused.size() && i < 5; ++i) list += (i ? ", " : "") + unused[i];
  if (unused.size() > 5) list += ", ...";
  std::string what = fmt::format("{} tensor(s) not used by the model: {}", unused.size(), list);
  if (max_layer >= mf.config.n_layers) {
    what = fmt::format("{} = {} but the file holds tensors of layer {} ({})", count_key, mf.config.n_layers, max_layer,
                       what);
  }
  if (!options.allow_unused_tensors) {
    throw ConfigError(fmt::format("{}: {}; the model would run without them (allow_unused_tensors / "
                                  "`allow_unused_tensors` to run anyway)", mf.path, what));
  }
  mf.warnings.push_back(what);
}

void CheckPositionalKeys(const std::string& source, const std::vector<std::string>& unread, const std::string& arch) {
  if (unread.empty()) return;
  std::string list;
  for (const std::string& k : unread) list += (list.empty() ? "" : ", ") + k;
  throw ConfigError(fmt::format("{}: positional key(s) {} are not applied by posenc's {} architecture: the model "
                                "would run without them", source, list, arch));
}

// Runs an architecture reader; errors that do not name the file yet (tensor slicing, reordering) get its name.
template <typename F>
void WithSource(const std::string& src, F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    if (std::string_view(e.what()).substr(0, src.size()) == src) throw;
    throw ConfigError(fmt::format("{}: {}", src, e.what()));
  }
}

void Finish(ModelFile& mf, const LoadNotes& notes) {
  for (const std::string& n : notes.notes) mf.warnings.push_back(n);
}

TensorView GgufView(const GgufTensorInfo& t) {
  return TensorView{std::string(t.name), t.type, t.Shape(), t.data, static_cast<int64_t>(t.n_bytes), nullptr};
}

TensorView HfView(const SafetensorsTensor& t) {
  return TensorView{t.name, t.type, t.shape, t.data, static_cast<int64_t>(t.n_bytes()), nullptr};
}

}  // namespace

ModelFile LoadGgufModel(const GgufFile& g, const LoadOptions& options) {
  const std::string& src = g.path();
  ModelFile mf;
  mf.path = src;
  mf.format = ModelFormat::kGguf;
  mf.format_detail = fmt::format("GGUF v{}", g.version());
  mf.files.push_back(g.file());
  const std::string arch_name(g.GetString("general.architecture"));
  const Architecture* arch = FindGgufArchitecture(arch_name);
  if (arch == nullptr || arch->from_gguf == nullptr) {
    const std::optional<std::string> family = OutOfScopeFamily(arch_name);
    throw ConfigError(fmt::format("{}: general.architecture '{}' is {}not supported (posenc reads {})", src, arch_name,
                                  family ? *family + ", which is out of posenc's scope: " : "", SupportedList(false)));
  }
  std::vector<std::string> names;
  for (const GgufTensorInfo& t : g.tensors()) names.emplace_back(t.name);
  TensorSource tensors(src, [&g](std::string_view name) -> std::optional<TensorView> {
    const GgufTensorInfo* t = g.FindTensor(name);
    return t ? std::optional<TensorView>(GgufView(*t)) : std::nullopt;
  }, names);
  GgufKeys keys(g, arch_name);
  LoadNotes notes;
  mf.config.architecture = std::string(arch->name);
  WithSource(src, [&] { arch->from_gguf(keys, tensors, mf.config, mf.tensors, notes); });
  for (const std::string& n : mf.tensors.also_used) tensors.MarkUsed(n);
  CheckPositionalKeys(src, keys.UnreadPositionalKeys(), arch_name);
  if (const std::optional<int64_t> v = g.FindInt64(arch_name + ".vocab_size"); v && *v != mf.config.vocab_size) {
    throw ConfigError(fmt::format("{}: {}.vocab_size = {} but token_embd.weight has {} rows", src, arch_name, *v,
                                  mf.config.vocab_size));
  }
  ValidateModelConfig(mf.config, src);
  CheckModelTensors(src, mf.config, mf.tensors);
  Finish(mf, notes);
  CheckUnused(mf, tensors, options, (arch_name + ".block_count").c_str());
  return mf;
}

ModelFile LoadHfModel(const HfCheckpoint& ck, const LoadOptions& options) {
  const std::string& src = ck.config_path;
  const json& cfg = ck.config;
  ModelFile mf;
  mf.path = ck.dir;
  mf.format = ModelFormat::kHuggingFace;
  mf.format_detail = fmt::format("HF safetensors ({} file{})", ck.shards.size(), ck.shards.size() == 1 ? "" : "s");
  for (const SafetensorsFile& s : ck.shards) mf.files.push_back(s.file());
  HfKeys keys(cfg, src, static_cast<int64_t>(ck.index.size()));
  std::string hf_class;
  if (const json* archs = keys.Get("architectures")) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      throw ConfigError(fmt::format("{}: 'architectures' must be a list of class names, got {}", src, archs->dump()));
    }
    hf_class = (*archs)[0].get<std::string>();
  }
  const std::string model_type = keys.OptString("model_type").value_or("");
  const Architecture* arch = FindHfArchitecture(hf_class, model_type);
  if (arch == nullptr || arch->from_hf == nullptr) {
    const std::string name = hf_class.empty() ? model_type : hf_class;
    const std::optional<std::string> family = OutOfScopeFamily(name);
    throw ConfigError(fmt::format("{}: architecture '{}' is {}not supported (posenc reads {})", src,
                                  name.empty() ? "(neither architectures nor model_type given)" : name,
                                  family ? *family + ", which is out of posenc's scope: " : "", SupportedList(true)));
  }
  TensorSource tensors(ck.dir, [&ck](std::string_view name) -> std::optional<TensorView> {
    const SafetensorsTensor* t = ck.FindTensor(name);
    return t ? std::optional<TensorView>(HfView(*t)) : std::nullopt;
  }, ck.TensorNames());
  LoadNotes notes;
  mf.config.architecture = std::string(arch->name);
  WithSource(src, [&] { arch->from_hf(keys, tensors, mf.config, mf.tensors, notes); });
  for (const std::string& n : mf.tensors.also_used) tensors.MarkUsed(n);
  CheckPositionalKeys(src, keys.UnreadPositionalKeys(), std::string(arch->name));
  ValidateModelConfig(mf.config, src);
  CheckModelTensors(ck.dir, mf.config, mf.tensors);
  Finish(mf, notes);
  CheckUnused(mf, tensors, options, "num_hidden_layers");
  return mf;
}

ModelFile LoadLlama2cModel(std::shared_ptr<const MappedFile> file) {
  const std::string& src = file->path();
  Llama2cHeader h;
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
  ModelConfig& c = mf.config;
  c.architecture = "llama";
  c.dim = h.dim;
  c.hidden_dim = h.hidden_dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.head_dim();
  c.vocab_size = h.vocab_size;
  c.norm_eps = 1e-5;  // run.c rmsnorm
  c.rope_layout = RopeLayout::kInterleaved;
  c.train_ctx = h.seq_len;
  c.tied_embeddings = h.shared_classifier;
  LayerSpec spec;
  spec.rope_params.head_dim = c.head_dim;
  spec.rope_params.rotary_dim = c.head_dim;
  spec.rope_params.rope_theta = 10000.0;  // run.c: powf(10000.0f, head_dim / (float)head_size)
  spec.rope_params.max_position_embeddings = h.seq_len;
  c.layers.assign(static_cast<size_t>(c.n_layers), spec);

  const CheckpointLayout o = CheckpointTensorOffsets(h);
  const uint8_t* base = file->data();
  auto view = [&](const std::string& name, int64_t offset, std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return TensorView{name, GgmlType::kF32, std::move(shape), base + offset, n * 4, nullptr};
  };
  const int64_t dim = c.dim, kv = c.kv_dim(), hid = c.hidden_dim;
  ModelTensors& m = mf.tensors;
  m.token_embd = view("token_embedding_table", o.token_embedding_table, {c.vocab_size, dim});
  m.output_norm.weight = view("rms_final_weight", o.rms_final_weight, {dim});
  if (!h.shared_classifier) m.output = view("wcls", o.wcls, {c.vocab_size, dim});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string s = fmt::format("[{}]", i);
    LayerTensors l;
    l.attn_norm = NormTensors{view("rms_att_weight" + s, o.rms_att_weight + i * dim * 4, {dim}), std::nullopt, false};
    l.wq = view("wq" + s, o.wq + i * dim * dim * 4, {dim, dim});
    l.wk = view("wk" + s, o.wk + i * kv * dim * 4, {kv, dim});
    l.wv = view("wv" + s, o.wv + i * kv * dim * 4, {kv, dim});
    l.wo = view("wo" + s, o.wo + i * dim * dim * 4, {dim, dim});
    l.ffn_norm = NormTensors{view("rms_ffn_weight" + s, o.rms_ffn_weight + i * dim * 4, {dim}), std::nullopt, false};
    l.w_gate = view("w1" + s, o.w1 + i * hid * dim * 4, {hid, dim});
    l.w_down = view("w2" + s, o.w2 + i * dim * hid * 4, {dim, hid});
    l.w_up = view("w3" + s, o.w3 + i * hid * dim * 4, {hid, dim});
    m.layers.push_back(std::move(l));
  }
  ValidateModelConfig(c, src);
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

namespace {

// GGUF: the magic, or the name. A file named .gguf goes to the GGUF reader even without the magic, which then
// names the damage (wrong magic, truncated) instead of the file being read as a llama2.c checkpoint.
bool IsGgufFile(const std::string& path, const MappedFile& file) {
  return (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0) || std::string_view(path).ends_with(".gguf");
}

}  // namespace

ModelFormat DetectModelFormat(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("cannot open model '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) return ModelFormat::kHuggingFace;
  const std::shared_ptr<const MappedFile> file = MappedFile::Open(path);  // refuses FIFOs, devices
  if (IsGgufFile(path, *file)) return ModelFormat::kGguf;
  return ModelFormat::kLlama2c;
}

ModelFile LoadModelFile(const std::string& path, const LoadOptions& options) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw IoError(fmt::format("cannot open model '{}': {}", path, std::strerror(errno)));
  if (S_ISDIR(st.st_mode)) return LoadHfModel(OpenHfCheckpoint(path), options);
  std::shared_ptr<const MappedFile> file = MappedFile::Open(path);
  if (IsGgufFile(path, *file)) {
    return LoadGgufModel(GgufFile::Parse(std::move(file)), options);
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

namespace {

std::string SpecText(const LayerSpec& l) {
  std::string s = l.rope ? fmt::format("RoPE theta {}, scaling {}", l.rope_params.rope_theta, RopeScalingText(l)) : "NoPE";
  if (l.sliding()) s += fmt::format(", window {}", l.sliding_window);
  return s;
}

}  // namespace

std::string RopeScalingText(const LayerSpec& l) {
  const RopeParams& p = l.rope_params;
  std::string s = p.rope_type == RopeType::kDefault ? "none" : std::string(RopeTypeName(p.rope_type));
  if (p.factor) s += fmt::format(" x{}", *p.factor);
  if (p.attention_factor && p.rope_type != RopeType::kDefault) s += fmt::format(", attention_factor {}", *p.attention_factor);
  if (l.rope_magnitude != 1.0) s += fmt::format(", magnitude {}", l.rope_magnitude);
  if (!l.rope_freq_factors.empty()) s += " + rope_freqs";
  if (p.RotaryDim() != p.head_dim) s += fmt::format(", rotary_dim {}", p.RotaryDim());
  return s;
}

std::vector<LayerGroup> GroupLayers(const ModelConfig& c) {
  std::vector<LayerGroup> groups;
  for (int64_t i = 0; i < static_cast<int64_t>(c.layers.size()); ++i) {
    const LayerSpec& l = c.layers[static_cast<size_t>(i)];
    auto it = std::find_if(groups.begin(), groups.end(), [&](const LayerGroup& g) {
      return SamePositionalSpec(c.layers[static_cast<size_t>(g.layers.front())], l);
    });
    if (it == groups.end()) {
      groups.push_back({fmt::format("({}): {}", l.type, SpecText(l)), {i}});
    } else {
      it->layers.push_back(i);
    }
  }
  return groups;
}

std::vector<std::string> DescribeLayers(const ModelConfig& c) {
  std::vector<std::string> out;
  for (const LayerGroup& g : GroupLayers(c)) {
    std::string ids;
    for (int64_t i : g.layers) ids += (ids.empty() ? "" : ", ") + std::to_string(i);
    out.push_back(fmt::format("layer{} {} {}", g.layers.size() == 1 ? "" : "s", ids, g.description));
  }
  return out;
}

ModelFileSummary ModelFile::Summary() const {
  ModelFileSummary s;
  const ModelConfig& c = config;
  s.format = format_detail;
  s.architecture = c.architecture;
  s.dim = c.dim;
  s.hidden_dim = c.hidden_dim;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.head_dim = c.head_dim;
  s.vocab_size = c.vocab_size;
  tensors.ForEach([&](const TensorView& t) { ++s.tensor_types[std::string(GgmlTypeName(t.type))]; });
  s.train_ctx = c.train_ctx;
  if (const LayerSpec* p = PrimaryRopeLayer(c)) {
    s.rope_theta = p->rope_params.rope_theta;
    s.rope_scaling = RopeScalingText(*p);
  } else {
    s.rope_scaling = "none";
  }
  s.rope_layout = RopeLayoutName(c.rope_layout);
  if (c.absolute_positions != AbsolutePositions::kNone) {
    s.positions = fmt::format("{} absolute positions ({} rows)", AbsolutePositionsName(c.absolute_positions),
                              c.n_positions);
  }
  if (LayersDiffer(c)) {
    for (const std::string& d : DescribeLayers(c)) s.positions += (s.positions.empty() ? "" : "; ") + d;
  } else if (!c.layers.empty() && c.layers.front().sliding()) {
    s.positions += (s.positions.empty() ? "" : "; ") + fmt::format("sliding window {}", c.layers.front().sliding_window);
  } else if (!c.layers.empty() && !c.layers.front().rope && c.absolute_positions == AbsolutePositions::kNone) {
    s.positions = "no positional encoding (NoPE)";
  }
  return s;
}

std::string SummaryLine(const ModelFileSummary& s) {
  std::string types;
  for (const auto& [name, count] : s.tensor_types) types += fmt::format("{}{} x{}", types.empty() ? "" : ", ", name, count);
  std::string rope = s.rope_theta > 0 ? fmt::format("RoPE base {}, scaling {}, {} rows", s.rope_theta, s.rope_scaling,
                                                    s.rope_layout)
                                      : std::string("no RoPE");
  return fmt::format("{} {}: dim {}, {} layers, {} heads x head_dim {}, {} kv heads, ffn {}, vocab {}; tensors {}; "
                     "L0 {}; {}{}",
                     s.format, s.architecture, s.dim, s.n_layers, s.n_heads, s.head_dim, s.n_kv_heads, s.hidden_dim,
                     s.vocab_size, types, s.train_ctx, rope, s.positions.empty() ? "" : "; " + s.positions);
}

}  // namespace posenc
