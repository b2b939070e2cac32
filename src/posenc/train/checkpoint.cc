#include "posenc/train/checkpoint.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <string_view>
#include <vector>

#include "posenc/core/errors.h"
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

void Append(std::string& out, const float* p, int64_t n) {
  out.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n) * sizeof(float));
}

}  // namespace

TrainModelConfig TrainConfigFromModelFile(const ModelFile& file, int64_t max_seq_len) {
  const ModelConfig& c = file.config;
  auto refuse = [&](const std::string& what) {
    throw ConfigError(fmt::format("{}: the training layers are a Llama block (pre-RMSNorm, SwiGLU, RoPE on every "
                                  "layer); this {} model has {}", file.path, c.architecture, what));
  };
  if (c.attn_output_bias) refuse("an attention output bias (attention_bias)");
  if (c.norm != NormType::kRms) refuse("LayerNorm");
  if (!c.attn_pre_norm || !c.ffn_pre_norm || c.attn_post_norm || c.ffn_post_norm) refuse("other norm placements");
  if (c.parallel_residual) refuse("a parallel residual");
  if (c.qk_norm != QkNorm::kNone) refuse("q/k norms");
  if (!c.gated_ffn || c.activation != Activation::kSilu || c.ffn_bias) refuse("another feed-forward");
  if (c.embedding_scale != 1.0 || c.attn_logit_softcapping || c.final_logit_softcapping || c.query_pre_attn_scalar) {
    refuse("an embedding scale, soft-capping or a query scale");
  }
  if (c.absolute_positions != AbsolutePositions::kNone) refuse("absolute positions");
  const LayerSpec* primary = PrimaryRopeLayer(c);
  if (primary == nullptr) refuse("no RoPE layer");
  for (const LayerSpec& l : c.layers) {
    if (!l.rope) refuse("layers without RoPE (NoPE)");
    if (l.sliding()) refuse("sliding-window layers");
    if (!l.rope_freq_factors.empty() || l.rope_magnitude != 1.0) refuse("rope_freqs factors or a RoPE magnitude");
  }
  if (LayersDiffer(c)) refuse("layers with different RoPE");
  const RopeParams& rope = primary->rope_params;
  if (rope.RotaryDim() != c.head_dim) {
    throw ConfigError(fmt::format("{}: rotary_dim {} is below head_dim {}; the training layers rotate whole heads",
                                  file.path, rope.RotaryDim(), c.head_dim));
  }
  if (rope.rope_type != RopeType::kDefault) {
    throw ConfigError(fmt::format("{}: the model already has RoPE scaling ({}); fine-tune an unscaled model",
                                  file.path, RopeTypeName(rope.rope_type)));
  }
  TrainModelConfig t;
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
  t.position_encoding = PositionEncoding::kRope;
  t.rope_theta = rope.rope_theta;
  ValidateTrainModelConfig(t);
  return t;
}

void LoadParameters(const ModelFile& file, TrainModel<float>& model) {
  const ParameterLayout& layout = model.layout();
  const std::span<float> p = model.parameters();
  const ModelTensors& m = file.tensors;
  const TrainModelConfig& c = model.config();
  CopyTensor(m.token_embd, layout, "token_embd.weight", 0, p);
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const LayerTensors& t = m.layers[static_cast<size_t>(l)];
    CopyTensor(t.attn_norm->weight, layout, Blk(l, "attn_norm.weight"), 0, p);
    CopyTensor(t.wq, layout, Blk(l, "attn_q.weight"), 0, p);
    CopyTensor(t.wk, layout, Blk(l, "attn_k.weight"), 0, p);
    CopyTensor(t.wv, layout, Blk(l, "attn_v.weight"), 0, p);
    if (c.attention_bias) {
      CopyTensor(*t.bq, layout, Blk(l, "attn_q.bias"), 0, p);
      CopyTensor(*t.bk, layout, Blk(l, "attn_k.bias"), 0, p);
      CopyTensor(*t.bv, layout, Blk(l, "attn_v.bias"), 0, p);
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
    const int64_t hd = c.resolved_head_dim();
    for (int64_t l = 0; l < c.n_layers; ++l) {
      // Whole heads rotate (TrainConfigFromModelFile refuses partial rotary): rotary_dim = head_dim.
      HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_q.weight")).offset, c.n_heads, hd, hd, c.dim);
      HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_k.weight")).offset, c.n_kv_heads, hd, hd, c.dim);
      if (c.attention_bias) {
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_q.bias")).offset, c.n_heads, hd, hd);
        HalfSplitToInterleaved(p.data() + layout.Find(Blk(l, "attn_k.bias")).offset, c.n_kv_heads, hd, hd);
      }
    }
  }
}

void CheckLlama2cCheckpoint(const TrainModelConfig& c, const std::string& path) {
  const int64_t hd = c.resolved_head_dim();
  if (c.position_encoding != PositionEncoding::kRope || c.attention_bias || hd * c.n_heads != c.dim ||
      c.rope_theta != 10000.0) {
    throw ConfigError(fmt::format("{}: a llama2.c checkpoint holds only RoPE models with rope_theta 10000 (run.c's, "
                                  "the format has no field for it), without q/k/v biases and with head_dim = dim / "
                                  "n_heads (this model: position_encoding {}, rope_theta {}, head_dim {}, dim {}, "
                                  "n_heads {}); write a .gguf instead", path,
                                  PositionEncodingName(c.position_encoding), c.rope_theta, hd, c.dim, c.n_heads));
  }
}

void WriteLlama2cCheckpoint(const TrainModel<float>& model, const CheckpointRope& rope, const std::string& path) {
  const TrainModelConfig& c = model.config();
  const int64_t hd = c.resolved_head_dim();
  CheckLlama2cCheckpoint(c, path);
  const int64_t seq_len = rope.original_ctx > 0 ? rope.original_ctx : c.max_seq_len;
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
  const TrainModelConfig& c = model.config();
  const int64_t hd = c.resolved_head_dim();
  GgufWriter w;
  if (source != nullptr) w.CopyMetadata(*source);
  const std::string a = "llama.";
  w.Set("general.architecture", GgufWriteValue::String("llama"));
  w.Set(a + "context_length", GgufWriteValue::UInt32(static_cast<uint32_t>(rope.ctx > 0 ? rope.ctx : c.max_seq_len)));
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
  w.Set("posenc.position_encoding", GgufWriteValue::String(std::string(PositionEncodingName(c.position_encoding))));
  for (const ParameterTensor& t : model.layout().tensors()) {
    w.AddTensor(t.name, GgmlType::kF32, t.shape,
                model.parameters().subspan(static_cast<size_t>(t.offset), static_cast<size_t>(t.size())));
  }
  w.WriteFile(path, /*overwrite=*/true);
}

std::string TrainModelKey(const TrainModelConfig& config) { return TrainModelConfigToJson(config).dump(); }

void WriteTrainState(const TrainModel<float>& model, const AdamW<float>& adamw, const TrainStateInfo& info,
                     const std::string& path) {
  GgufWriter w;
  w.Set("general.architecture", GgufWriteValue::String("posenc-train-state"));
  w.Set("posenc.train.step", GgufWriteValue::Int64(info.step));
  w.Set("posenc.train.seed", GgufWriteValue::UInt64(info.seed));
  w.Set("posenc.train.adam_step", GgufWriteValue::Int64(adamw.step()));
  w.Set("posenc.train.model", GgufWriteValue::String(info.model_key));
  const int64_t n = model.layout().total();
  const std::vector<int64_t> shape = {n};
  w.AddTensor("parameters", GgmlType::kF32, shape, model.parameters());
  w.AddTensor("adam.m", GgmlType::kF32, shape, adamw.m());
  w.AddTensor("adam.v", GgmlType::kF32, shape, adamw.v());
  w.WriteFile(path, /*overwrite=*/true);
}

TrainState ReadTrainState(const std::string& path, TrainModel<float>& model) {
  const GgufFile g = GgufFile::Open(path);
  const std::optional<std::string_view> key = g.FindString("posenc.train.model");
  if (!key) throw ConfigError(fmt::format("--resume {}: not a posenc training state (no posenc.train.model)", path));
  const std::string want = TrainModelKey(model.config());
  if (*key != want) {
    throw ConfigError(fmt::format("--resume {} was written for another model ({}); this run trains {}", path, *key,
                                  want));
  }
  TrainState s;
  s.info.step = g.GetInt64("posenc.train.step");
  s.info.seed = g.GetUInt64("posenc.train.seed");
  s.info.model_key = std::string(*key);
  const int64_t n = model.layout().total();
  auto read = [&](const char* name, float* dst) {
    const GgufTensorInfo& t = g.GetTensor(name);
    if (t.type != GgmlType::kF32 || t.n_elements != n) {
      throw ShapeError(fmt::format("--resume {}: tensor {} must be F32 with {} elements", path, name, n));
    }
    std::memcpy(dst, t.data, static_cast<size_t>(n) * sizeof(float));
  };
  s.m.resize(static_cast<size_t>(n));
  s.v.resize(static_cast<size_t>(n));
  read("parameters", model.parameters().data());
  read("adam.m", s.m.data());
  read("adam.v", s.v.data());
  if (g.GetInt64("posenc.train.adam_step") != s.info.step) {
    throw ConfigError(fmt::format("--resume {}: posenc.train.adam_step differs from posenc.train.step", path));
  }
  return s;
}

}  // namespace posenc
