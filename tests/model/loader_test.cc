// The format-independent model loader: the same weights in different containers are equal after dequantization
// (stories260K .bin = F32 GGUF = HF folder; F16/BF16 within their rounding; Q8_0 within its derived error bound;
// llama-mini-rand HF BF16 = bf16 GGUF exactly), configs from every format, and every missing / mistyped key,
// missing / misshapen tensor and unsupported model, each a clear error naming the file and the key or tensor.

#include "posenc/model/loader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "formats/formats_test_util.h"
#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/formats/gguf_writer.h"

namespace posenc {
namespace {

using testing::ExpectThrowWith;
using testing::ModelFixture;

std::vector<float> Dequantized(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.n_elements()));
  for (int64_t r = 0; r < t.rows(); ++r) DequantizeRow(t.type, t.Row(r), out.data() + r * t.cols(), t.cols());
  return out;
}

// Hugging Face half-split rows -> interleaved rows, per head: interleaved row 2i + p is HF row p * head_dim/2 + i
// (transformers convert_llama_weights_to_hf.py `permute`, inverted; convert_hf_to_gguf.py LlamaModel.permute).
std::vector<float> HalfSplitToInterleavedRows(const std::vector<float>& w, int64_t n_heads, int64_t head_dim,
                                              int64_t cols) {
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < head_dim / 2; ++i) {
      for (int64_t p = 0; p < 2; ++p) {
        const int64_t dst = h * head_dim + 2 * i + p, src = h * head_dim + p * head_dim / 2 + i;
        std::copy_n(w.begin() + src * cols, cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

// Visits the model's tensors pairwise (same role in both models).
void ForEachPair(const ModelFile& a, const ModelFile& b,
                 const std::function<void(const TensorView&, const TensorView&, const char* role)>& f) {
  f(a.tensors.token_embd, b.tensors.token_embd, "token_embd");
  f(a.tensors.output_norm.weight, b.tensors.output_norm.weight, "output_norm");
  f(a.tensors.classifier(), b.tensors.classifier(), "classifier");
  ASSERT_EQ(a.tensors.layers.size(), b.tensors.layers.size());
  for (size_t i = 0; i < a.tensors.layers.size(); ++i) {
    const LayerTensors &x = a.tensors.layers[i], &y = b.tensors.layers[i];
    f(x.attn_norm->weight, y.attn_norm->weight, "attn_norm");
    f(x.wq, y.wq, "wq");
    f(x.wk, y.wk, "wk");
    f(x.wv, y.wv, "wv");
    f(x.wo, y.wo, "wo");
    f(x.ffn_norm->weight, y.ffn_norm->weight, "ffn_norm");
    f(*x.w_gate, *y.w_gate, "w_gate");
    f(x.w_down, y.w_down, "w_down");
    f(x.w_up, y.w_up, "w_up");
  }
}

void ExpectSameConfig(const ModelConfig& a, const ModelConfig& b) {
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.layers[0].rope_params.rope_theta, b.layers[0].rope_params.rope_theta);
  EXPECT_EQ(a.layers[0].rope_params.RotaryDim(), b.layers[0].rope_params.RotaryDim());
  EXPECT_EQ(a.layers[0].rope_params.rope_type, b.layers[0].rope_params.rope_type);
  EXPECT_EQ(a.train_ctx, b.train_ctx);
  EXPECT_FLOAT_EQ(static_cast<float>(a.norm_eps), static_cast<float>(b.norm_eps));
}

// ---- stories260K in every container --------------------------------------------------------------------------------

TEST(ModelFile, Stories260KConfigs) {
  const ModelFile bin = LoadModelFile(std::string(POSENC_DATA_DIR) + "/stories260K.bin");
  const ModelFile gguf = LoadModelFile(ModelFixture("stories260K-F32.gguf"));
  const ModelFile hf = LoadModelFile(ModelFixture("stories260K-hf"));
  EXPECT_EQ(bin.format, ModelFormat::kLlama2c);
  EXPECT_EQ(gguf.format, ModelFormat::kGguf);
  EXPECT_EQ(hf.format, ModelFormat::kHuggingFace);
  const ModelConfig& c = bin.config;
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.train_ctx, 512);
  EXPECT_EQ(c.layers[0].rope_params.rope_theta, 10000.0);
  EXPECT_TRUE(c.tied_embeddings);
  ExpectSameConfig(bin.config, gguf.config);
  ExpectSameConfig(bin.config, hf.config);
  EXPECT_EQ(bin.config.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(gguf.config.rope_layout, RopeLayout::kInterleaved);
  EXPECT_EQ(hf.config.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_FALSE(gguf.config.tied_embeddings);  // the converter writes output.weight (a copy of the embedding)
  EXPECT_TRUE(hf.config.tied_embeddings);
  EXPECT_FALSE(gguf.config.attn_qkv_bias);
  // The converter's raw output says 128: the loader reports what the file says.
  EXPECT_EQ(LoadModelFile(ModelFixture("stories260K-f32-ctx128.gguf")).config.train_ctx, 128);
}

TEST(ModelFile, Stories260KBinEqualsF32GgufExactly) {
  const ModelFile bin = LoadModelFile(std::string(POSENC_DATA_DIR) + "/stories260K.bin");
  const ModelFile gguf = LoadModelFile(ModelFixture("stories260K-F32.gguf"));
  int compared = 0;
  ForEachPair(bin, gguf, [&](const TensorView& a, const TensorView& b, const char* role) {
    EXPECT_EQ(a.shape, b.shape) << role;
    EXPECT_EQ(Dequantized(a), Dequantized(b)) << role << " " << b.name;
    ++compared;
  });
  EXPECT_EQ(compared, 3 + 5 * 9);
}

TEST(ModelFile, Stories260KHfEqualsBinAfterUnpermutingQK) {
  const ModelFile bin = LoadModelFile(std::string(POSENC_DATA_DIR) + "/stories260K.bin");
  const ModelFile hf = LoadModelFile(ModelFixture("stories260K-hf"));
  const ModelConfig& c = hf.config;
  ForEachPair(bin, hf, [&](const TensorView& a, const TensorView& b, const char* role) {
    std::vector<float> want = Dequantized(a), got = Dequantized(b);
    if (std::string(role) == "wq") got = HalfSplitToInterleavedRows(got, c.n_heads, c.head_dim, c.dim);
    if (std::string(role) == "wk") got = HalfSplitToInterleavedRows(got, c.n_kv_heads, c.head_dim, c.dim);
    EXPECT_EQ(want, got) << role << " " << b.name;
  });
  // Without the permutation the q rows differ: the layouts really are different.
  EXPECT_NE(Dequantized(bin.tensors.layers[0].wq), Dequantized(hf.tensors.layers[0].wq));
}

// llama-quantize's F16 / BF16 conversion rounds each float32 to nearest even (ggml_fp32_to_fp16 /
// ggml_fp32_to_bf16); the norms stay F32.
TEST(ModelFile, Stories260KHalfTypesAreTheF32ValuesRounded) {
  const ModelFile f32 = LoadModelFile(ModelFixture("stories260K-F32.gguf"));
  for (const auto& [file_name, file_type] : {std::pair{"stories260K-F16.gguf", GgmlType::kF16},
                                             std::pair{"stories260K-BF16.gguf", GgmlType::kBF16}}) {
    const char* const file = file_name;  // plain copies: lambdas cannot capture structured bindings in C++20
    const GgmlType type = file_type;
    const ModelFile half = LoadModelFile(ModelFixture(file));
    int halves = 0;
    ForEachPair(f32, half, [&](const TensorView& a, const TensorView& b, const char* role) {
      const std::vector<float> x = Dequantized(a), y = Dequantized(b);
      ASSERT_EQ(x.size(), y.size());
      if (b.type == GgmlType::kF32) {
        EXPECT_EQ(x, y) << role;
        return;
      }
      EXPECT_EQ(b.type, type) << role;
      ++halves;
      for (size_t i = 0; i < x.size(); ++i) {
        const float r = type == GgmlType::kF16 ? F16ToF32(F32ToF16(x[i])) : BF16ToF32(F32ToBF16(x[i]));
        ASSERT_EQ(y[i], r) << file << " " << b.name << "[" << i << "]";
      }
    });
    EXPECT_EQ(halves, 2 + 5 * 7) << file;  // token_embd, output and 7 matrices per layer
  }
}

// Q8_0 (ggml quantize_row_q8_0_ref; gguf-py's numpy quantizer is the same up to rounding ties): per block of 32,
// d = amax / 127, q = round(x / d), stored d' = fp16(d). |x - q d'| <= |x - q d| + |q| |d - d'|
// <= d / 2 + 127 max(d 2^-11, 2^-25) (fp16 rounding: half an ulp, relative 2^-11 for normals, absolute 2^-25 for
// subnormals), plus float32 rounding of x / d and q d' (a few ulps of amax).
void ExpectWithinQ8_0Bound(const std::vector<float>& x, const std::vector<float>& y, const std::string& what) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (size_t j = b; j < b + 32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const double d = amax / 127.0;
    const double bound = d / 2 + 127 * std::max(d * std::ldexp(1.0, -11), std::ldexp(1.0, -25)) + 4e-7 * amax;
    for (size_t j = b; j < b + 32; ++j) {
      ASSERT_LE(std::fabs(static_cast<double>(x[j]) - y[j]), bound) << what << "[" << j << "]";
    }
  }
}

TEST(ModelFile, Stories260KQ8_0TensorsWithinTheirQuantizationBound) {
  const ModelFile f32 = LoadModelFile(ModelFixture("stories260K-F32.gguf"));
  int checked = 0;
  for (const char* file : {"stories260K-Q6_K.gguf", "stories260K-Q4_K_M.gguf"}) {
    const ModelFile q = LoadModelFile(ModelFixture(file));
    ForEachPair(f32, q, [&](const TensorView& a, const TensorView& b, const char*) {
      const std::vector<float> y = Dequantized(b);
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << b.name;
      if (b.type != GgmlType::kQ8_0) return;
      ExpectWithinQ8_0Bound(Dequantized(a), y, std::string(file) + " " + b.name);
      ++checked;
    });
  }
  EXPECT_GE(checked, 32 + 3);
}

// ---- llama-mini-rand (large fixtures, outside the repository) ----------------------------------------------------

TEST(ModelFile, LlamaMiniRandHfBf16EqualsBf16GgufExactly) {
  const std::string hf_dir = testing::SharedModel("llama-mini-rand");
  const std::string gguf_path = testing::SharedModel("llama-mini-rand-bf16.gguf");
  POSENC_SKIP_IF_ABSENT(hf_dir);
  POSENC_SKIP_IF_ABSENT(gguf_path);
  const ModelFile hf = LoadModelFile(hf_dir);
  const ModelFile gguf = LoadModelFile(gguf_path);
  const ModelConfig& c = hf.config;
  EXPECT_EQ(c.dim, 256);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.n_heads, 4);
  EXPECT_EQ(c.n_kv_heads, 2);
  EXPECT_EQ(c.hidden_dim, 704);
  EXPECT_EQ(c.vocab_size, 32000);
  EXPECT_EQ(c.train_ctx, 2048);
  EXPECT_TRUE(c.tied_embeddings);
  EXPECT_TRUE(gguf.config.tied_embeddings);
  ExpectSameConfig(hf.config, gguf.config);
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(gguf.config.rope_layout, RopeLayout::kInterleaved);
  ForEachPair(gguf, hf, [&](const TensorView& a, const TensorView& b, const char* role) {
    EXPECT_EQ(b.type, GgmlType::kBF16) << role;
    std::vector<float> want = Dequantized(a), got = Dequantized(b);
    if (std::string(role) == "wq") got = HalfSplitToInterleavedRows(got, c.n_heads, c.head_dim, c.dim);
    if (std::string(role) == "wk") got = HalfSplitToInterleavedRows(got, c.n_kv_heads, c.head_dim, c.dim);
    EXPECT_EQ(want, got) << role << " " << a.name;
  });
}

TEST(ModelFile, LlamaMiniRandQuantizedFiles) {
  const std::string hf_dir = testing::SharedModel("llama-mini-rand");
  POSENC_SKIP_IF_ABSENT(hf_dir);
  POSENC_SKIP_IF_ABSENT(testing::SharedModel("llama-mini-rand-q8_0.gguf"));
  const ModelFile hf = LoadModelFile(hf_dir);
  const ModelConfig& c = hf.config;
  const ModelFile q8 = LoadModelFile(testing::SharedModel("llama-mini-rand-q8_0.gguf"));
  EXPECT_EQ(SummaryLine(q8.Summary()),
            "GGUF v3 llama: dim 256, 2 layers, 4 heads x head_dim 64, 2 kv heads, ffn 704, vocab 32000; tensors "
            "f32 x5, q8_0 x15; L0 2048; RoPE base 10000, scaling none, interleaved rows");
  int checked = 0;
  ForEachPair(q8, hf, [&](const TensorView& a, const TensorView& b, const char* role) {
    std::vector<float> x = Dequantized(b);
    if (std::string(role) == "wq") x = HalfSplitToInterleavedRows(x, c.n_heads, c.head_dim, c.dim);
    if (std::string(role) == "wk") x = HalfSplitToInterleavedRows(x, c.n_kv_heads, c.head_dim, c.dim);
    if (a.type == GgmlType::kF32) {
      EXPECT_EQ(Dequantized(a), x) << a.name;  // BF16 norms widened exactly
      return;
    }
    ASSERT_EQ(a.type, GgmlType::kQ8_0) << a.name;
    ExpectWithinQ8_0Bound(x, Dequantized(a), a.name);
    ++checked;
  });
  EXPECT_EQ(checked, 2 + 2 * 7);  // embedding (read twice: it is also the classifier) + 7 matrices per layer
  const ModelFile q4 = LoadModelFile(testing::SharedModel("llama-mini-rand-Q4_K_M.gguf"));
  ExpectSameConfig(hf.config, q4.config);
  EXPECT_EQ(q4.Summary().tensor_types,
            (std::map<std::string, int>{{"q4_K", 11}, {"q6_K", 2}, {"q5_0", 1}, {"q8_0", 1}, {"f32", 5}}));
  // Every tensor dequantizes to finite values near the BF16 source. Estimate for b-bit codes over a block
  // range of about 4 sigma (32 normal draws): step 4 sigma / (2^b - 1), rms error step / sqrt(12); the bound is
  // twice that (b = 4: 0.154, 5: 0.074, 6: 0.037, 8: 0.009; measured 0.071, 0.043, 0.018, 0.005). A wrong block
  // layout gives uncorrelated values, an rms error of 100% or more.
  auto bits = [](GgmlType t) {
    switch (t) {
      case GgmlType::kQ5_0: case GgmlType::kQ5_1: case GgmlType::kQ5_K: return 5;
      case GgmlType::kQ6_K: return 6;
      case GgmlType::kQ8_0: return 8;
      default: return 4;
    }
  };
  ForEachPair(q4, hf, [&](const TensorView& a, const TensorView& b, const char* role) {
    std::vector<float> x = Dequantized(b);
    if (std::string(role) == "wq") x = HalfSplitToInterleavedRows(x, c.n_heads, c.head_dim, c.dim);
    if (std::string(role) == "wk") x = HalfSplitToInterleavedRows(x, c.n_kv_heads, c.head_dim, c.dim);
    const std::vector<float> y = Dequantized(a);
    if (a.type == GgmlType::kF32) {
      EXPECT_EQ(x, y) << a.name;
      return;
    }
    double err = 0, ref = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << a.name;
      err += (x[i] - y[i]) * double(x[i] - y[i]);
      ref += double(x[i]) * x[i];
    }
    const double bound = 2 * (4.0 / ((1 << bits(a.type)) - 1)) / std::sqrt(12.0);
    EXPECT_LT(std::sqrt(err / ref), bound) << a.name << " " << GgmlTypeName(a.type);
  });
}

// ---- GGUF models built here: every key and tensor rule ----------------------------------------------------------

// A small llama GGUF: dim 32, 2 heads (head_dim 16), 1 kv head, ffn 64, 2 layers, vocab 6; F32 weights.
struct TinyGguf {
  std::string arch = "llama";
  std::set<std::string> skip;                              // keys or tensors left out
  std::map<std::string, GgufWriteValue> keys;              // replaced or extra keys (full names)
  std::map<std::string, std::vector<int64_t>> shapes;      // replaced shapes (row-major)
  std::map<std::string, GgmlType> raw_types;               // tensors written as zero bytes of this type
  bool biases = false;
  bool output = true;

  ModelFile Load(const LoadOptions& options = {}) const {
    GgufWriter w;
    auto set = [&](const std::string& k, GgufWriteValue v) {
      if (skip.count(k)) return;
      auto it = keys.find(k);
      w.Set(k, it != keys.end() ? it->second : std::move(v));
    };
    set("general.architecture", GgufWriteValue::String(arch));
    const std::string a = arch + ".";
    set(a + "context_length", GgufWriteValue::UInt32(256));
    set(a + "embedding_length", GgufWriteValue::UInt32(32));
    set(a + "feed_forward_length", GgufWriteValue::UInt32(64));
    set(a + "block_count", GgufWriteValue::UInt32(2));
    set(a + "attention.head_count", GgufWriteValue::UInt32(2));
    set(a + "attention.head_count_kv", GgufWriteValue::UInt32(1));
    set(a + "attention.layer_norm_rms_epsilon", GgufWriteValue::Float32(1e-6f));
    set(a + "rope.freq_base", GgufWriteValue::Float32(500000.0f));
    for (const auto& [k, v] : keys) {
      bool known = false;
      for (const char* s : {"general.architecture", "context_length", "embedding_length", "feed_forward_length",
                            "block_count", "attention.head_count", "attention.head_count_kv",
                            "attention.layer_norm_rms_epsilon", "rope.freq_base"}) {
        known = known || k == s || k == a + s;
      }
      if (!known) w.Set(k, v);
    }
    auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
      if (skip.count(name)) return;
      if (auto it = shapes.find(name); it != shapes.end()) shape = it->second;
      if (auto it = raw_types.find(name); it != raw_types.end()) {
        int64_t rows = 1;
        for (size_t i = 0; i + 1 < shape.size(); ++i) rows *= shape[i];
        const int64_t row_bytes = GgmlRowBytes(it->second, shape.back());  // -1: not whole blocks
        w.AddTensorBytes(name, it->second, shape,
                         std::vector<uint8_t>(row_bytes < 0 ? 0 : static_cast<size_t>(rows * row_bytes)));
        return;
      }
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.001f * static_cast<float>(i % 97) + 0.5f;
      w.AddTensor(name, GgmlType::kF32, shape, v);
    };
    tensor("token_embd.weight", {6, 32});
    tensor("output_norm.weight", {32});
    if (output) tensor("output.weight", {6, 32});
    for (int i = 0; i < 2; ++i) {
      const std::string b = "blk." + std::to_string(i) + ".";
      tensor(b + "attn_norm.weight", {32});
      tensor(b + "attn_q.weight", {32, 32});
      tensor(b + "attn_k.weight", {16, 32});
      tensor(b + "attn_v.weight", {16, 32});
      tensor(b + "attn_output.weight", {32, 32});
      if (biases) {
        tensor(b + "attn_q.bias", {32});
        tensor(b + "attn_k.bias", {16});
        tensor(b + "attn_v.bias", {16});
      }
      tensor(b + "ffn_norm.weight", {32});
      tensor(b + "ffn_gate.weight", {64, 32});
      tensor(b + "ffn_down.weight", {32, 64});
      tensor(b + "ffn_up.weight", {64, 32});
    }
    for (const auto& [name, shape] : shapes) {
      if (name == "rope_freqs.weight") tensor(name, shape);
    }
    return LoadGgufModel(GgufFile::Parse(MappedFile::FromBytes(w.Serialize(), "tiny.gguf")), options);
  }
};

TEST(ModelFileGguf, TinyModelConfig) {
  const ModelFile m = TinyGguf{}.Load();
  const ModelConfig& c = m.config;
  EXPECT_EQ(c.dim, 32);
  EXPECT_EQ(c.n_heads, 2);
  EXPECT_EQ(c.n_kv_heads, 1);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.layers[0].rope_params.RotaryDim(), 16);
  EXPECT_EQ(c.layers[0].rope_params.rope_theta, 500000.0);
  EXPECT_EQ(c.layers[0].rope_params.rope_type, RopeType::kDefault);
  EXPECT_EQ(c.train_ctx, 256);
  EXPECT_EQ(c.vocab_size, 6);
  EXPECT_FLOAT_EQ(static_cast<float>(c.norm_eps), 1e-6f);
  EXPECT_EQ(c.rope_layout, RopeLayout::kInterleaved);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(m.tensors.layers.size(), 2u);
  EXPECT_EQ(m.tensors.layers[1].w_down.name, "blk.1.ffn_down.weight");
  EXPECT_EQ(m.tensors.layers[1].w_down.shape, (std::vector<int64_t>{32, 64}));
  EXPECT_TRUE(m.warnings.empty());
  TinyGguf tied;
  tied.output = false;
  const ModelFile tm = tied.Load();
  EXPECT_TRUE(tm.config.tied_embeddings);
  EXPECT_EQ(tm.tensors.classifier().name, "token_embd.weight");
}

TEST(ModelFileGguf, IntegerKeysOfAnyType) {
  TinyGguf t;
  t.keys.emplace("llama.context_length", GgufWriteValue::Int32(4096));      // --override-kv writes i32
  t.keys.emplace("llama.block_count", GgufWriteValue::UInt64(2));
  t.keys.emplace("llama.attention.head_count", GgufWriteValue::UInt8(2));
  t.keys.emplace("llama.attention.head_count_kv", GgufWriteValue::Int16(1));
  const ModelFile m = t.Load();
  EXPECT_EQ(m.config.train_ctx, 4096);
  EXPECT_EQ(m.config.n_layers, 2);
  EXPECT_EQ(m.config.n_kv_heads, 1);
}

TEST(ModelFileGguf, MissingOrMistypedKeys) {
  for (const char* key : {"general.architecture", "llama.embedding_length", "llama.block_count",
                          "llama.feed_forward_length", "llama.attention.head_count", "llama.context_length",
                          "llama.attention.layer_norm_rms_epsilon"}) {
    TinyGguf t;
    t.skip.insert(key);
    ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", std::string("'") + key + "'", "missing"});
  }
  TinyGguf t;
  t.keys.emplace("llama.block_count", GgufWriteValue::String("2"));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'llama.block_count'", "an integer", "string"});
  t = TinyGguf{};
  t.keys.emplace("llama.rope.freq_base", GgufWriteValue::UInt32(10000));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'llama.rope.freq_base'", "float", "uint32"});
  t = TinyGguf{};
  t.keys.emplace("llama.block_count", GgufWriteValue::Int32(-2));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.block_count", "got -2"});
  t = TinyGguf{};  // a layer count past the tensors held: refused before any per-layer allocation
  t.keys.emplace("llama.block_count", GgufWriteValue::UInt32(1U << 31));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.block_count = 2147483648", "tensor(s)"});
  t = TinyGguf{};
  t.keys.emplace("llama.embedding_length", GgufWriteValue::UInt64(1ULL << 40));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.embedding_length", "1099511627776"});
  t = TinyGguf{};
  t.keys.emplace("llama.attention.head_count_kv", GgufWriteValue::UInt32(3));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "n_heads must be a multiple of n_kv_heads", "3"});
  t = TinyGguf{};
  t.keys.emplace("llama.vocab_size", GgufWriteValue::UInt32(7));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.vocab_size = 7", "6 rows"});
  t = TinyGguf{};
  t.keys.emplace("llama.attention.layer_norm_rms_epsilon", GgufWriteValue::Float32(-1.0f));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.attention.layer_norm_rms_epsilon", "-1"});
}

TEST(ModelFileGguf, UnsupportedArchitectureAndScaling) {
  TinyGguf t;
  t.arch = "bert";
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "general.architecture 'bert'", "not supported"});
  t.arch = "mamba";
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'mamba'", "state-space", "out of posenc's scope"});
  t = TinyGguf{};
  t.keys.emplace("llama.rope.scaling.type", GgufWriteValue::String("ntk-by-parts"));
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "llama.rope.scaling.type", "'ntk-by-parts'"});
  t = TinyGguf{};
  t.keys.emplace("llama.rope.scaling.type", GgufWriteValue::String("longrope"));  // without its factor tensors
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "longrope"});
  t = TinyGguf{};
  // llama.cpp: linear without a factor is a factor of 1, i.e. no scaling.
  t.keys.emplace("llama.rope.scaling.type", GgufWriteValue::String("linear"));
  EXPECT_EQ(t.Load().config.layers[0].rope_params.rope_type, RopeType::kDefault);
}

TEST(ModelFileGguf, RopeScalingKeys) {
  TinyGguf t;
  t.keys.emplace("llama.rope.scaling.type", GgufWriteValue::String("yarn"));
  t.keys.emplace("llama.rope.scaling.factor", GgufWriteValue::Float32(4.0f));
  t.keys.emplace("llama.rope.scaling.original_context_length", GgufWriteValue::UInt32(64));
  t.keys.emplace("llama.rope.scaling.attn_factor", GgufWriteValue::Float32(1.5f));
  t.keys.emplace("llama.rope.dimension_count", GgufWriteValue::UInt32(8));
  const ModelFile m = t.Load();
  EXPECT_EQ(m.config.layers[0].rope_params.rope_type, RopeType::kYarn);
  EXPECT_EQ(m.config.layers[0].rope_params.factor, 4.0);
  EXPECT_EQ(m.config.layers[0].rope_params.original_max_position_embeddings, 64);
  EXPECT_EQ(m.config.train_ctx, 64);
  EXPECT_EQ(m.config.layers[0].rope_params.max_position_embeddings, 256);
  EXPECT_EQ(m.config.layers[0].rope_params.RotaryDim(), 8);
  // llama.cpp's YaRN magnitude: attn_factor times (1 + 0.1 ln s), folded into the attention factor.
  ASSERT_TRUE(m.config.layers[0].rope_params.attention_factor.has_value());
  EXPECT_NEAR(*m.config.layers[0].rope_params.attention_factor, 1.5 * (1.0 + 0.1 * std::log(4.0)), 1e-6);
  EXPECT_EQ(m.Summary().rope_scaling.rfind("yarn x4, attention_factor 1.70", 0), 0u) << m.Summary().rope_scaling;
  TinyGguf linear;
  linear.keys.emplace("llama.rope.scaling.type", GgufWriteValue::String("linear"));
  linear.keys.emplace("llama.rope.scaling.factor", GgufWriteValue::Float32(2.0f));
  EXPECT_EQ(linear.Load().config.layers[0].rope_params.rope_type, RopeType::kLinear);
  EXPECT_EQ(linear.Load().config.train_ctx, 256);
}

TEST(ModelFileGguf, RopeFreqsTensor) {
  TinyGguf t;
  t.shapes["rope_freqs.weight"] = {8};
  const ModelFile m = t.Load();
  ASSERT_EQ(m.config.layers[0].rope_freq_factors.size(), 8u);
  EXPECT_EQ(m.config.layers[0].rope_freq_factors[1], 0.001f * 1.0f + 0.5f);  // the builder's pattern 0.001 (i % 97) + 0.5
  EXPECT_EQ(m.Summary().rope_scaling, "none + rope_freqs");
  t.shapes["rope_freqs.weight"] = {7};
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'rope_freqs.weight'", "[7]", "[8]"});
}

TEST(ModelFileGguf, KeyLengthSetsHeadDim) {
  TinyGguf t;
  t.keys.emplace("llama.attention.key_length", GgufWriteValue::UInt32(8));
  t.shapes = {{"blk.0.attn_q.weight", {16, 32}}, {"blk.1.attn_q.weight", {16, 32}},
              {"blk.0.attn_k.weight", {8, 32}},  {"blk.1.attn_k.weight", {8, 32}},
              {"blk.0.attn_v.weight", {8, 32}},  {"blk.1.attn_v.weight", {8, 32}},
              {"blk.0.attn_output.weight", {32, 16}}, {"blk.1.attn_output.weight", {32, 16}}};
  const ModelFile m = t.Load();
  EXPECT_EQ(m.config.head_dim, 8);
  EXPECT_EQ(m.config.q_dim(), 16);
  EXPECT_EQ(m.config.layers[0].rope_params.RotaryDim(), 8);
}

TEST(ModelFileGguf, MissingOrMisshapenTensors) {
  for (const char* name : {"token_embd.weight", "output_norm.weight", "blk.1.ffn_up.weight", "blk.0.attn_k.weight"}) {
    TinyGguf t;
    t.skip.insert(name);
    ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", std::string("'") + name + "'", "missing"});
  }
  TinyGguf t;
  t.shapes["blk.1.attn_k.weight"] = {32, 32};
  ExpectThrowWith<ConfigError>([&] { t.Load(); },
                               {"tiny.gguf", "'blk.1.attn_k.weight'", "[32, 32]", "expected [16, 32]"});
  t = TinyGguf{};
  t.shapes["output.weight"] = {7, 32};
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'output.weight'", "[7, 32]", "[6, 32]"});
  t = TinyGguf{};
  t.raw_types["blk.0.ffn_gate.weight"] = GgmlType::kQ8_1;
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'blk.0.ffn_gate.weight'", "q8_1", "cannot dequantize"});
  t = TinyGguf{};
  t.raw_types["blk.0.ffn_gate.weight"] = GgmlType::kQ4_K;  // rows of 32 are not a whole number of 256-blocks
  EXPECT_THROW(t.Load(), ShapeError);                       // refused by the writer already
}

TEST(ModelFileGguf, Qwen2NeedsBiasesAndUsesHalfSplitRows) {
  TinyGguf t;
  t.arch = "qwen2";
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "'blk.0.attn_q.bias'", "missing"});
  t.biases = true;
  const ModelFile m = t.Load();
  EXPECT_EQ(m.config.architecture, "qwen2");
  EXPECT_TRUE(m.config.attn_qkv_bias);
  EXPECT_EQ(m.config.rope_layout, RopeLayout::kHalfSplit);
  ASSERT_TRUE(m.tensors.layers[1].bk.has_value());
  EXPECT_EQ(m.tensors.layers[1].bk->shape, (std::vector<int64_t>{16}));
  // A llama file with biases on layer 0 only: every layer must have them.
  TinyGguf partial;
  partial.biases = true;
  partial.skip.insert("blk.1.attn_v.bias");
  ExpectThrowWith<ConfigError>([&] { partial.Load(); }, {"tiny.gguf", "'blk.1.attn_v.bias'", "missing"});
}

TEST(ModelFileGguf, UnusedTensorsAreReported) {
  TinyGguf t;
  t.biases = true;
  t.arch = "llama";
  t.skip = {"blk.0.attn_q.bias", "blk.1.attn_q.bias"};  // k/v biases alone: not a bias model, so unused
  // Tensors the model would ignore are an error (the run would silently lack them) unless allowed.
  ExpectThrowWith<ConfigError>([&] { t.Load(); }, {"tiny.gguf", "4 tensor(s) not used", "blk.0.attn_k.bias"});
  const ModelFile m = t.Load(LoadOptions{/*allow_unused_tensors=*/true});
  EXPECT_FALSE(m.config.attn_qkv_bias);
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("4 tensor(s) not used"), std::string::npos) << m.warnings[0];
}

// ---- Hugging Face folders built here --------------------------------------------------------------------------

TEST(ModelFileHf, UnsupportedModelsAndMissingTensors) {
  testing::TempDir dir("hf_model");
  const std::string d = dir.path.string();
  std::filesystem::copy_file(ModelFixture("stories260K-hf/model.safetensors"), dir / "model.safetensors");
  const std::string base =
      R"("hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,)"
      R"( "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 512, "rms_norm_eps": 1e-05,)"
      R"( "tie_word_embeddings": true)";
  auto config = [&](const std::string& extra) { std::ofstream(dir / "config.json") << "{" << base << extra << "}"; };
  config(R"(, "architectures": ["LlamaForCausalLM"])");
  EXPECT_EQ(LoadModelFile(d).config.n_layers, 5);
  config(R"(, "architectures": ["MistralForCausalLM"])");
  EXPECT_EQ(LoadModelFile(d).config.architecture, "mistral");
  config(R"(, "architectures": ["BertForMaskedLM"])");
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {"config.json", "'BertForMaskedLM'", "not supported"});
  config(R"(, "architectures": ["MixtralForCausalLM"])");
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {"config.json", "mixture-of-experts", "out of posenc's scope"});
  config(R"(, "architectures": ["LlamaForCausalLM"], "hidden_act": "gelu")");
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {"config.json", "hidden_act", "gelu"});
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,)"
                                     << R"( "intermediate_size": 172, "num_hidden_layers": 2000000000,)"
                                     << R"( "num_attention_heads": 8, "vocab_size": 512})";
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); },
                               {"config.json", "num_hidden_layers = 2000000000", "holds 47 tensor(s)"});
  config(R"(, "architectures": ["Qwen2ForCausalLM"])");  // Qwen2 needs q/k/v biases
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {d, "'model.layers.0.self_attn.q_proj.bias'", "missing"});
  config(R"(, "architectures": ["LlamaForCausalLM"], "tie_word_embeddings": false)");
  ExpectThrowWith<IoError>([&] { LoadModelFile(d); }, {"config.json", "duplicate key 'tie_word_embeddings'"});
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64})";
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {"config.json", "'intermediate_size'", "missing"});
  std::ofstream(dir / "config.json") << "{" << base << R"(, "architectures": ["LlamaForCausalLM"], )"
                                     << R"("rope_scaling": {"rope_type": "linear"}})";
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {"config.json", "factor"});
  std::ofstream(dir / "config.json") << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64,)"
                                     << R"( "intermediate_size": 172, "num_hidden_layers": 5, "num_attention_heads": 8,)"
                                     << R"( "num_key_value_heads": 4, "vocab_size": 512, "max_position_embeddings": 512})";
  ExpectThrowWith<ConfigError>([&] { LoadModelFile(d); }, {d, "'lm_head.weight'", "missing"});  // untied by default
}

TEST(ModelFileHf, RopeScalingAndTrainingLength) {
  testing::TempDir dir("hf_rope");
  const std::string d = dir.path.string();
  std::filesystem::copy_file(ModelFixture("stories260K-hf/model.safetensors"), dir / "model.safetensors");
  std::ofstream(dir / "config.json")
      << R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "intermediate_size": 172,)"
      << R"( "num_hidden_layers": 5, "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,)"
      << R"( "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "tie_word_embeddings": true,)"
      << R"( "rope_theta": 500000.0, "rope_scaling": {"rope_type": "yarn", "factor": 8.0,)"
      << R"( "original_max_position_embeddings": 512}})";
  const ModelFile m = LoadModelFile(d);
  EXPECT_EQ(m.config.layers[0].rope_params.rope_type, RopeType::kYarn);
  EXPECT_EQ(m.config.layers[0].rope_params.factor, 8.0);
  EXPECT_EQ(m.config.train_ctx, 512);
  EXPECT_EQ(m.config.layers[0].rope_params.max_position_embeddings, 4096);
  EXPECT_EQ(m.config.layers[0].rope_params.rope_theta, 500000.0);
  EXPECT_EQ(m.config.rope_layout, RopeLayout::kHalfSplit);
}

// ---- paths -------------------------------------------------------------------------------------------------------

TEST(ModelFile, BadPaths) {
  ExpectThrowWith<IoError>([] { LoadModelFile("/nonexistent/model.gguf"); }, {"/nonexistent/model.gguf"});
  testing::TempDir dir("model_paths");
  const std::string fifo = dir / "model.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ExpectThrowWith<IoError>([&] { LoadModelFile(fifo); }, {"model.fifo", "FIFO"});
  ExpectThrowWith<IoError>([&] { LoadModelFile(dir.path.string()); }, {"config.json is missing"});
  std::ofstream(dir / "junk.bin") << "not a model";
  ExpectThrowWith<IoError>([&] { LoadModelFile(dir / "junk.bin"); }, {"junk.bin"});
  std::ofstream(dir / "damaged.gguf") << "GGUX and the rest of a header";  // a GGUF whose magic is damaged
  ExpectThrowWith<IoError>([&] { LoadModelFile(dir / "damaged.gguf"); },
                           {"damaged.gguf", "magic must be \"GGUF\"", "got 0x58554747", "not a GGUF file"});
  EXPECT_EQ(DetectModelFormat(dir / "damaged.gguf"), ModelFormat::kGguf);  // by its name
  std::ofstream(dir / "empty.gguf");
  ExpectThrowWith<IoError>([&] { LoadModelFile(dir / "empty.gguf"); }, {"empty.gguf", "truncated", "magic"});
  ExpectThrowWith<IoError>([&] { LoadModelFile(ModelFixture("stories260K-hf/model.safetensors")); },
                           {"model.safetensors", "give its folder"});
  EXPECT_EQ(DetectModelFormat(ModelFixture("stories260K-Q6_K.gguf")), ModelFormat::kGguf);
  EXPECT_EQ(DetectModelFormat(ModelFixture("stories260K-hf")), ModelFormat::kHuggingFace);
}

TEST(ModelFile, SummaryLine) {
  const ModelFile m = LoadModelFile(ModelFixture("stories260K-Q4_K_M.gguf"));
  EXPECT_EQ(SummaryLine(m.Summary()),
            "GGUF v3 llama: dim 64, 5 layers, 8 heads x head_dim 8, 4 kv heads, ffn 172, vocab 512; tensors f16 x5, "
            "f32 x11, q5_0 x29, q8_0 x3; L0 512; RoPE base 10000, scaling none, interleaved rows");
}

}  // namespace
}  // namespace posenc
