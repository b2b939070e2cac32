// Writes a random-weight Llama-family GGUF file of a realistic shape with posenc's GGUF writer, for the prefill
// benchmark (bench/prefill_bench.sh). Not a model anyone should read text with: weights are uniform on
// [-a, a] with a = sqrt(3) * 0.02 (standard deviation 0.02, the initialisation scale of Llama checkpoints), norms
// are 1, so activations stay finite through every layer.
//
//   posenc_write_bench_model OUT.gguf SHAPE TYPE [SEED]
//   SHAPE: tinyllama   (TinyLlama-1.1B: dim 2048, 22 layers, 32 heads, 4 kv heads, ffn 5632, vocab 32000)
//          7b-width-4l (Llama-2-7B's widths: dim 4096, 4 layers, 32 heads, 32 kv heads, ffn 11008, vocab 32000)
//   TYPE:  f32, bf16 or q8_0 (every matrix; norms F32), as llama.cpp's converters and llama-quantize write them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/core/dtype.h"
#include "posenc/formats/gguf_writer.h"

namespace {

struct Shape {
  int64_t dim, n_layers, n_heads, n_kv_heads, ffn, vocab, context;
};

// xorshift64*: fast, seeded, the same on every platform.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    return s * 0x2545F4914F6CDD1DULL;
  }
  float Uniform(float a) {  // [-a, a)
    return a * (static_cast<float>(Next() >> 40) * (2.0f / 16777216.0f) - 1.0f);
  }
};

constexpr float kStd = 0.02f;

void AddMatrix(posenc::GgufWriter& w, const std::string& name, posenc::GgmlType type, int64_t rows, int64_t cols,
               Rng& rng) {
  const int64_t shape[2] = {rows, cols};
  const float a = std::sqrt(3.0f) * kStd;
  if (type == posenc::GgmlType::kQ8_0) {
    // Blocks of 32: an f16 scale d, then 32 int8 codes; value = d * code. Codes uniform in [-127, 127] and
    // d = a / 127 give the same value range as the float files.
    const int64_t blocks = rows * cols / 32;
    std::vector<uint8_t> bytes(static_cast<size_t>(blocks * 34));
    const uint16_t d = posenc::F32ToF16(a / 127.0f);
    for (int64_t b = 0; b < blocks; ++b) {
      uint8_t* p = bytes.data() + b * 34;
      std::memcpy(p, &d, 2);
      for (int i = 0; i < 32; ++i) p[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(rng.Next() % 255 - 127));
    }
    w.AddTensorBytes(name, type, shape, bytes);
    return;
  }
  std::vector<float> values(static_cast<size_t>(rows * cols));
  for (float& v : values) v = rng.Uniform(a);
  w.AddTensor(name, type, shape, values);
}

void AddOnes(posenc::GgufWriter& w, const std::string& name, int64_t n) {
  const int64_t shape[1] = {n};
  const std::vector<float> ones(static_cast<size_t>(n), 1.0f);
  w.AddTensor(name, posenc::GgmlType::kF32, shape, ones);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s OUT.gguf tinyllama|7b-width-4l f32|bf16|q8_0 [seed]\n", argv[0]);
    return 2;
  }
  const std::string out = argv[1], shape_name = argv[2], type_name = argv[3];
  Shape s{};
  if (shape_name == "tinyllama") {
    s = {2048, 22, 32, 4, 5632, 32000, 2048};
  } else if (shape_name == "7b-width-4l") {
    s = {4096, 4, 32, 32, 11008, 32000, 4096};
  } else {
    std::fprintf(stderr, "unknown shape '%s' (tinyllama, 7b-width-4l)\n", shape_name.c_str());
    return 2;
  }
  posenc::GgmlType type;
  if (type_name == "f32") {
    type = posenc::GgmlType::kF32;
  } else if (type_name == "bf16") {
    type = posenc::GgmlType::kBF16;
  } else if (type_name == "q8_0") {
    type = posenc::GgmlType::kQ8_0;
  } else {
    std::fprintf(stderr, "unknown type '%s' (f32, bf16, q8_0)\n", type_name.c_str());
    return 2;
  }
  Rng rng{argc > 4 ? std::stoull(argv[4]) : 0x9E3779B97F4A7C15ULL};
  try {
    posenc::GgufWriter w;
    using V = posenc::GgufWriteValue;
    w.Set("general.architecture", V::String("llama"));
    w.Set("general.name", V::String(fmt::format("random {} {}", shape_name, type_name)));
    w.Set("llama.context_length", V::UInt32(static_cast<uint32_t>(s.context)));
    w.Set("llama.embedding_length", V::UInt32(static_cast<uint32_t>(s.dim)));
    w.Set("llama.block_count", V::UInt32(static_cast<uint32_t>(s.n_layers)));
    w.Set("llama.feed_forward_length", V::UInt32(static_cast<uint32_t>(s.ffn)));
    w.Set("llama.attention.head_count", V::UInt32(static_cast<uint32_t>(s.n_heads)));
    w.Set("llama.attention.head_count_kv", V::UInt32(static_cast<uint32_t>(s.n_kv_heads)));
    w.Set("llama.attention.layer_norm_rms_epsilon", V::Float32(1e-5f));
    w.Set("llama.rope.freq_base", V::Float32(10000.0f));
    const int64_t hd = s.dim / s.n_heads, kv_dim = s.n_kv_heads * hd;
    AddMatrix(w, "token_embd.weight", type, s.vocab, s.dim, rng);
    for (int64_t l = 0; l < s.n_layers; ++l) {
      const std::string b = fmt::format("blk.{}.", l);
      AddOnes(w, b + "attn_norm.weight", s.dim);
      AddMatrix(w, b + "attn_q.weight", type, s.dim, s.dim, rng);
      AddMatrix(w, b + "attn_k.weight", type, kv_dim, s.dim, rng);
      AddMatrix(w, b + "attn_v.weight", type, kv_dim, s.dim, rng);
      AddMatrix(w, b + "attn_output.weight", type, s.dim, s.dim, rng);
      AddOnes(w, b + "ffn_norm.weight", s.dim);
      AddMatrix(w, b + "ffn_gate.weight", type, s.ffn, s.dim, rng);
      AddMatrix(w, b + "ffn_up.weight", type, s.ffn, s.dim, rng);
      AddMatrix(w, b + "ffn_down.weight", type, s.dim, s.ffn, rng);
    }
    AddOnes(w, "output_norm.weight", s.dim);
    AddMatrix(w, "output.weight", type, s.vocab, s.dim, rng);
    w.WriteFile(out, /*overwrite=*/true);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
