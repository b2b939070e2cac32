#include "posenc/train/checkpoint.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <span>
#include <string_view>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/gguf_writer.h"
#include "posenc/io/output_file.h"
#include "posenc/rope/layout.h"
#include "posenc/train/config_json.h"

namespace posenc {
namespace {

// Copies one model-file tensor into the flat buffer at the layout tensor `name`, rows `row0` onward of it.
void CopyTensor(const TensorView& src, const ParameterLayout& layout, const std::string& name, int64_t row0,
                std::span<float> params) {
  const ParameterTensor& t = layout.Find(name);
  const int64_t cols = t.shape.back();
  const int64_t rows_total = t.size() / cols;
  if (src.cols() != cols || row0 + src.rows() > rows_total) {
    throw ShapeError(fmt::format("tensor {} has shape [{}, {}], the training layout needs [{} of {}, {}]", src.name,
                                 src.rows(), src.cols(), rows_total - row0, rows_total, cols));
  }
  float* dst = params.data() + t.offset + row0 * cols;
  for (int64_t r = 0; r < src.rows(); ++r) DequantizeRow(src.type, src.Row(r), dst + r * cols, cols);
}

std::string Blk(int64_t l, const char* what) { return fmt::format("blk.{}.{}", l, what); }

// The inverse of HalfSplitToInterleaved (rotary_dim = head_dim): x [n_groups, head_dim, cols] from interleaved
// pairs (2i, 2i + 1) back to half-split pairs (i, i + head_dim / 2).
std::vector<float> InterleavedToHalfSplit(std::span<const float> x, int64_t n_groups, int64_t head_dim) {
  const int64_t cols = static_cast<int64_t>(x.size()) / (n_groups * head_dim), half = head_dim / 2;
  std::vector<float> out(x.size());
  for (int64_t g = 0; g < n_groups; ++g) {
    const float* src = x.data() + g * head_dim * cols;
    float* dst = out.data() + g * head_dim * cols;
    for (int64_t i = 0; i < half; ++i) {
      std::copy_n(src + (2 * i) * cols, cols, dst + i * cols);
      std::copy_n(src + (2 * i + 1) * cols, cols, dst + (i + half) * cols);
    }
  }
  return out;
}

void Append(std::string& out, const float* p, int64_t n) {
  out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

TrainShape TrainConfigFromModelFile(const ModelFile& file, int64_t max_seq_len) {
  const ModelConfig& c = file.config;
  auto refuse = [&](const std::string& what) {
    throw ConfigError(fmt::format("{}: the training layers are a Llama block (pre-RMSNorm, SwiGLU, RoPE on every "
                                  "layer); this {} model has {}", file.path, c.architecture, what));
  };
  if (c.absolute_positions != AbsolutePositions::kNone) refuse("absolute positions");
  const LayerSpec* primary = PrimaryRopeLayer(c);
  if (primary == nullptr) refuse("no RoPE layer");
  const RopeParams& rope = primary->rope_params;
  ModelConfig interleaved = c;  // LoadParameters puts half-split q/k rows into interleaved pairs
  interleaved.rope_layout = RopeLayout::kInterleaved;
  CheckTrainable(interleaved, file.path);
  TrainShape t;
  t.dim = c.dim;
  t.hidden_dim = c.hidden_dim;
  t.n_layers = c.n_layers;
  t.n_heads = c.n_heads;
  t.n_kv_heads = c.n_kv_heads;
  t.head_dim = c.head_dim;
  t.vocab_size = c.vocab_size;
  t.max_seq_len = max_seq_len;
  t.norm_eps = c.norm_eps;
  t.attention_bias = c.attn_qkv_bias;
  t.tied_embeddings = c.tied_embeddings;
  t.qk_norm = c.qk_norm == QkNorm::kPerHead;
  t.position_encoding = PositionEncoding::kRope;
  t.rope_theta = rope.rope_theta;
  ValidateTrainShape(t);
  return t;
}

void LoadParameters(const ModelFile& file, TrainModel<float>& model) {
  const ParameterLayout& layout = model.layout();
  const std::span<float> p = model.parameters();
  const ModelTensors& m = file.tensors;
  const ModelConfig& c = model.config();
  CopyTensor(m.token_embd, layout, "token_embd.weight", 0, p);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerTensors& t = m.layers[static_cast<size_t>(l)];
    CopyTensor(t.attn_norm->weight, layout, Blk(l, "attn_norm.weight"), 0, p);
    CopyTensor(t.wq, layout, Blk(l, "attn_q.weight"), 0, p);
    CopyTensor(t.wk, layout, Blk(l, "attn_k.weight"), 0, p);
    CopyTensor(t.wv, layout, Blk(l, "attn_v.weight"), 0, p);
    if (c.attn_qkv_bias) {
      CopyTensor(*t.bq, layout, Blk(l, "attn_q.bias"), 0, p);
      CopyTensor(*t.bk, layout, Blk(l, "attn_k.bias"), 0, p);
      CopyTensor(*t.bv, layout, Blk(l, "attn_v.bias"), 0, p);
    }
    if (c.qk_norm == QkNorm::kPerHead) {
      CopyTensor(t.q_norm->weight, layout, Blk(l, "attn_q_norm.weight"), 0, p);
      CopyTensor(t.k_norm->weight, layout, Blk(l, "attn_k_norm.weight"), 0, p);
    }
    CopyTensor(t.wo, layout, Blk(l, "attn_output.weight"), 0, p);
    CopyTensor(t.ffn_norm->weight, layout, Blk(l, "ffn_norm.weight"), 0, p);
    CopyTensor(*t.w_gate, layout, Blk(l, "ffn_gate.weight"), 0, p);
    CopyTensor(t.w_up, layout, Blk(l, "ffn_up.weight"), 0, p);
    CopyTensor(t.w_down, layout, Blk(l, "ffn_down.weight"), 0, p);
  }
  CopyTensor(m.output_norm.weight, layout, "output_norm.weight", 0, p);
  if (!c.tied_embeddings) CopyTensor(*m.output, layout, "output.weight", 0, p);
  if (file.config.rope_layout == RopeLayout::kHalfSplit) {
    const int64_t hd = c.head_dim;
    for (int64_t l = 0; l < c.n_layers; ++l) {
      // Whole heads rotate (TrainConfigFromModelFile refuses partial rotary): rotary_dim = head_dim.
      HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_q.weight")).offset, c.n_heads, hd, hd, c.dim);
      HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_k.weight")).offset, c.n_kv_heads, hd, hd, c.dim);
      if (c.attn_qkv_bias) {
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_q.bias")).offset, c.n_heads, hd, hd);
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_k.bias")).offset, c.n_kv_heads, hd, hd);
      }
      if (c.qk_norm == QkNorm::kPerHead) {  // a head's norm weights follow its channels
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_q_norm.weight")).offset, 1, hd, hd);
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_k_norm.weight")).offset, 1, hd, hd);
      }
    }
  }
}

void CheckLlama2cCheckpoint(const ModelConfig& c, const std::string& path) {
  const int64_t hd = c.head_dim;
  const PositionEncoding pe = TrainPositionEncoding(c);
  const double rope_theta = c.layers.empty() ? 0.0 : c.layers.front().rope_params.rope_theta;
  if (pe != PositionEncoding::kRope || c.attn_qkv_bias || c.qk_norm != QkNorm::kNone || hd * c.n_heads != c.dim ||
      rope_theta != 10000.0) {
    throw ConfigError(fmt::format("{}: a llama2.c checkpoint holds only RoPE models with rope_theta 10000 (run.c's, "
                                  "the format has no field for it), without q/k/v biases or q/k norms and with "
                                  "head_dim = dim / n_heads (this model: position_encoding {}, rope_theta {}, head_dim "
                                  "{}, dim {}, n_heads {}, qk_norm {}); write a .gguf instead", path,
                                  PositionEncodingName(pe), rope_theta, hd, c.dim, c.n_heads, QkNormName(c.qk_norm)));
  }
}

void WriteLlama2cCheckpoint(const TrainModel<float>& model, const CheckpointRope& rope, const std::string& path) {
  const ModelConfig& c = model.config();
  const int64_t hd = c.head_dim;
  CheckLlama2cCheckpoint(c, path);
  const int64_t seq_len = rope.original_ctx > 0 ? rope.original_ctx : c.train_ctx;
  const int32_t header[7] = {static_cast<int32_t>(c.dim),        static_cast<int32_t>(c.hidden_dim),
                             static_cast<int32_t>(c.n_layers),   static_cast<int32_t>(c.n_heads),
                             static_cast<int32_t>(c.n_kv_heads),
                             static_cast<int32_t>(c.tied_embeddings ? c.vocab_size : -c.vocab_size),
                             static_cast<int32_t>(seq_len)};
  std::string out(reinterpret_cast<const char*>(header), sizeof(header));
  const ParameterLayout& layout = model.layout();
  const float* p = model.parameters().data();
  auto tensor = [&](const std::string& name) { Append(out, p + layout.Find(name).offset, layout.Find(name).size()); };
  tensor("token_embd.weight");
  for (const char* name : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight",
                           "attn_output.weight", "ffn_norm.weight", "ffn_gate.weight", "ffn_down.weight",
                           "ffn_up.weight"}) {
    for (int64_t l = 0; l < c.n_layers; ++l) tensor(Blk(l, name));
  }
  tensor("output_norm.weight");
  // Legacy freq_cis_real then freq_cis_imag [seq_len, head_dim / 2] (run.c skips them).
  std::vector<float> fc(static_cast<size_t>(seq_len * hd / 2)), fs(fc.size());
  for (int64_t t = 0; t < seq_len; ++t) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double angle =
          static_cast<double>(t) * std::pow(rope.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      fc[static_cast<size_t>(t * hd / 2 + i)] = static_cast<float>(std::cos(angle));
      fs[static_cast<size_t>(t * hd / 2 + i)] = static_cast<float>(std::sin(angle));
    }
  }
  Append(out, fc.data(), static_cast<int64_t>(fc.size()));
  Append(out, fs.data(), static_cast<int64_t>(fs.size()));
  if (!c.tied_embeddings) tensor("output.weight");
  WriteFileAtomically(path, out);
}

void WriteGgufCheckpoint(const TrainModel<float>& model, const CheckpointRope& rope, const GgufFile* source,
                         const std::string& path) {
  const ModelConfig& c = model.config();
  const int64_t hd = c.head_dim;
  GgufWriter w;
  if (source != nullptr) w.CopyMetadata(*source);
  // A per-head q/k norm model is a qwen3 file (llama.cpp's NEOX rope mode: its q/k rows go back to half-split
  // pairs), every other one a llama file (NORM mode: interleaved, as trained).
  const bool qwen3 = c.qk_norm == QkNorm::kPerHead;
  const std::string arch = qwen3 ? "qwen3" : "llama";
  const std::string a = arch + ".";
  w.Set("general.architecture", GgufWriteValue::String(arch));
  w.Set(a + "context_length", GgufWriteValue::UInt32(static_cast<uint32_t>(rope.ctx > 0 ? rope.ctx : c.train_ctx)));
  w.Set(a + "embedding_length", GgufWriteValue::UInt32(static_cast<uint32_t>(c.dim)));
  w.Set(a + "block_count", GgufWriteValue::UInt32(static_cast<uint32_t>(c.n_layers)));
  w.Set(a + "feed_forward_length", GgufWriteValue::UInt32(static_cast<uint32_t>(c.hidden_dim)));
  w.Set(a + "attention.head_count", GgufWriteValue::UInt32(static_cast<uint32_t>(c.n_heads)));
  w.Set(a + "attention.head_count_kv", GgufWriteValue::UInt32(static_cast<uint32_t>(c.n_kv_heads)));
  w.Set(a + "attention.key_length", GgufWriteValue::UInt32(static_cast<uint32_t>(hd)));
  w.Set(a + "attention.value_length", GgufWriteValue::UInt32(static_cast<uint32_t>(hd)));
  w.Set(a + "attention.layer_norm_rms_epsilon", GgufWriteValue::Float32(static_cast<float>(c.norm_eps)));
  w.Set(a + "vocab_size", GgufWriteValue::UInt32(static_cast<uint32_t>(c.vocab_size)));
  w.Set(a + "rope.dimension_count", GgufWriteValue::UInt32(static_cast<uint32_t>(hd)));
  double theta = rope.rope_theta;
  if (rope.method == "ntk") theta *= std::pow(rope.factor, static_cast<double>(hd) / static_cast<double>(hd - 2));
  w.Set(a + "rope.freq_base", GgufWriteValue::Float32(static_cast<float>(theta)));
  if (rope.method == "linear" || rope.method == "yarn") {
    w.Set(a + "rope.scaling.type", GgufWriteValue::String(rope.method));
    w.Set(a + "rope.scaling.factor", GgufWriteValue::Float32(static_cast<float>(rope.factor)));
    w.Set(a + "rope.scaling.original_context_length",
          GgufWriteValue::UInt32(static_cast<uint32_t>(rope.original_ctx)));
  }
  w.Set("posenc.rope.method", GgufWriteValue::String(rope.method));
  w.Set("posenc.rope.factor", GgufWriteValue::Float64(rope.factor));
  w.Set("posenc.position_encoding",
        GgufWriteValue::String(std::string(PositionEncodingName(model.position_encoding()))));
  for (const ParameterTensor& t : model.layout().tensors()) {
    const std::span<const float> values =
        model.parameters().subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.size()));
    const std::string_view name = t.name;
    const bool q = name.ends_with("attn_q.weight") || name.ends_with("attn_q.bias");
    const bool k = name.ends_with("attn_k.weight") || name.ends_with("attn_k.bias");
    const bool norm = name.ends_with("attn_q_norm.weight") || name.ends_with("attn_k_norm.weight");
    if (qwen3 && (q || k || norm)) {
      w.AddTensor(t.name, GgmlType::kF32, t.shape,
                  InterleavedToHalfSplit(values, norm ? 1 : (q ? c.n_heads : c.n_kv_heads), hd));
    } else {
      w.AddTensor(t.name, GgmlType::kF32, t.shape, values);
    }
  }
  w.WriteFile(path, /*overwrite=*/true);
}

std::string TrainModelKey(const TrainShape& config) { return TrainShapeToJson(config).dump(); }

uint64_t TrainStateChecksum(const TrainStateInfo& info, int64_t adam_step, std::span<const float> parameters,
                            std::span<const float> m, std::span<const float> v) {
  Fingerprint f;
  const TrainRunSettings& r = info.settings;
  f.Add(info.step).Add(adam_step).Add(static_cast<int64_t>(info.seed)).Add(info.model_key).Add(r.method);
  for (double d : {r.factor, r.lr, r.weight_decay, r.grad_clip}) f.Add(std::bit_cast<int64_t>(d));
  f.Add(r.ctx).Add(r.batch);
  if (r.parse_special) f.Add(int64_t{1});  // absent (off) in states written before the setting existed
  if (!r.texts.empty()) f.Add(r.texts);     // absent in states written before the texts were recorded
  for (std::span<const float> t : {parameters, m, v}) f.Add(std::as_bytes(t));
  return f.value();
}

void WriteTrainState(const TrainModel<float>& model, const AdamW<float>& adamw, const TrainStateInfo& info,
                     const std::string& path) {
  GgufWriter w;
  w.Set("general.architecture", GgufWriteValue::String("posenc-train-state"));
  w.Set("posenc.train.step", GgufWriteValue::Int64(info.step));
  w.Set("posenc.train.seed", GgufWriteValue::UInt64(info.seed));
  w.Set("posenc.train.adam_step", GgufWriteValue::Int64(adamw.step()));
  w.Set("posenc.train.model", GgufWriteValue::String(info.model_key));
  const TrainRunSettings& r = info.settings;
  w.Set("posenc.train.method", GgufWriteValue::String(r.method));
  w.Set("posenc.train.factor", GgufWriteValue::Float64(r.factor));
  w.Set("posenc.train.ctx", GgufWriteValue::Int64(r.ctx));
  w.Set("posenc.train.batch", GgufWriteValue::Int64(r.batch));
  w.Set("posenc.train.lr", GgufWriteValue::Float64(r.lr));
  w.Set("posenc.train.weight_decay", GgufWriteValue::Float64(r.weight_decay));
  w.Set("posenc.train.grad_clip", GgufWriteValue::Float64(r.grad_clip));
  w.Set("posenc.train.parse_special", GgufWriteValue::Bool(r.parse_special));
  if (!r.texts.empty()) w.Set("posenc.train.texts", GgufWriteValue::String(r.texts));
  w.Set("posenc.train.checksum",
        GgufWriteValue::UInt64(TrainStateChecksum(info, adamw.step(), model.parameters(), adamw.m(), adamw.v())));
  const int64_t n = model.layout().total();
  const std::vector<int64_t> shape = {n};
  w.AddTensor("parameters", GgmlType::kF32, shape, model.parameters());
  w.AddTensor("adam.m", GgmlType::kF32, shape, adamw.m());
  w.AddTensor("adam.v", GgmlType::kF32, shape, adamw.v());
  w.WriteFile(path, /*overwrite=*/true);
}

TrainState ReadTrainState(const std::string& path, TrainModel<float>& model, const std::string& model_key) {
  const GgufFile g = GgufFile::Open(path);
  const std::optional<std::string_view> key = g.FindString("posenc.train.model");
  if (!key) throw ConfigError(fmt::format("`resume_path` {}: not a posenc training state (no posenc.train.model)", path));
  const std::string& want = model_key;
  if (*key != want) {
    throw ConfigError(fmt::format("`resume_path` {} was written for another model ({}); this run trains {}", path, *key,
                                  want));
  }
  if (!g.Has("posenc.train.checksum") || !g.Has("posenc.train.method")) {
    throw IoError(fmt::format("`resume_path` {} has no checksum or run settings (written by an earlier posenc): it "
                              "cannot be checked, so it is not resumed; start the run again", path));
  }
  TrainState s;
  s.info.step = g.GetInt64("posenc.train.step");
  s.info.seed = g.GetUInt64("posenc.train.seed");
  s.info.model_key = std::string(*key);
  TrainRunSettings& r = s.info.settings;
  r.method = std::string(g.GetString("posenc.train.method"));
  r.factor = g.GetFloat("posenc.train.factor");
  r.ctx = g.GetInt64("posenc.train.ctx");
  r.batch = g.GetInt64("posenc.train.batch");
  r.lr = g.GetFloat("posenc.train.lr");
  r.weight_decay = g.GetFloat("posenc.train.weight_decay");
  r.grad_clip = g.GetFloat("posenc.train.grad_clip");
  // States written before --parse-special existed ran without it: no key means off.
  r.parse_special = g.FindBool("posenc.train.parse_special").value_or(false);
  if (const std::optional<std::string_view> texts = g.FindString("posenc.train.texts")) r.texts = *texts;
  const int64_t adam_step = g.GetInt64("posenc.train.adam_step");
  const uint64_t stored_sum = g.GetUInt64("posenc.train.checksum");
  const int64_t n = model.layout().total();
  auto read = [&](const char* name, float* dst) {
    const GgufTensorInfo& t = g.GetTensor(name);
    if (t.type != GgmlType::kF32 || t.n_elements != n) {
      throw ShapeError(fmt::format("`resume_path` {}: tensor {} must be F32 with {} elements", path, name, n));
    }
    std::memcpy(dst, t.data, static_cast<size_t>(n) * sizeof(float));
  };
  s.m.resize(static_cast<size_t>(n));
  s.v.resize(static_cast<size_t>(n));
  read("parameters", model.parameters().data());
  read("adam.m", s.m.data());
  read("adam.v", s.v.data());
  const uint64_t sum = TrainStateChecksum(s.info, adam_step, model.parameters(), s.m, s.v);
  if (sum != stored_sum) {
    throw IoError(fmt::format("`resume_path` {} is damaged: its checksum is {:#018x}, its weights, moments and keys give "
                              "{:#018x} (the file changed after it was written)", path, stored_sum, sum));
  }
  if (adam_step != s.info.step) {
    throw ConfigError(fmt::format("`resume_path` {}: posenc.train.adam_step differs from posenc.train.step", path));
  }
  return s;
}

void CheckResumeSettings(const std::string& path, const TrainStateInfo& state, const TrainStateInfo& run) {
  const TrainRunSettings& a = state.settings;
  const TrainRunSettings& b = run.settings;
  auto differ = [&](std::string_view option, const auto& was, const auto& now) {
    if (was == now) return;
    throw ConfigError(fmt::format("`resume_path` {} was trained with {} {}; this run asks for {} {} (a resumed run keeps "
                                  "the options it started with; only `steps` may grow)", path, option, was, option,
                                  now));
  };
  differ("`method`", a.method, b.method);
  differ("`factor`", a.factor, b.factor);
  differ("`ctx`", a.ctx, b.ctx);
  differ("`batch`", a.batch, b.batch);
  differ("`lr`", a.lr, b.lr);
  differ("`weight_decay`", a.weight_decay, b.weight_decay);
  differ("`grad_clip`", a.grad_clip, b.grad_clip);
  differ("`seed`", state.seed, run.seed);
  differ("`parse_special`", a.parse_special ? "on" : "off", b.parse_special ? "on" : "off");
  if (!a.texts.empty()) differ("the texts (`text_path`, `held_out_path`):", a.texts, b.texts);
}

}  // namespace posenc
