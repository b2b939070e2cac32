// Fuzz harness: bytes as a llama2.c checkpoint (ReadCheckpoint: header checked against the size, every tensor
// read and checked finite), then, if accepted, the same bytes through the model-file loader (LoadLlama2cModel) and
// the model run on them: one window forward pass and two KV-cache decode steps with the plain RoPE table of its
// head_dim.
//
// Beyond "no crash, no sanitizer report, no exception other than posenc::Error": every weight of an accepted
// checkpoint is finite, and a forward pass either returns finite logits or stops with a posenc::Error (a
// NumericError when finite but huge weights overflow float32).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/attention/kv_cache.h"
#include "posenc/core/errors.h"
#include "posenc/formats/llama2c.h"
#include "posenc/formats/mapped_file.h"
#include "posenc/model/loader.h"
#include "posenc/model/transformer.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

namespace {

void RequireFinite(const std::vector<float>& v, const char* what) {
  for (float x : v) {
    if (!std::isfinite(x)) {
      std::fprintf(stderr, "llama2c_checkpoint_fuzz: non-finite %s (%g) passed\n", what, x);
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  posenc::Checkpoint ck;
  try {
    ck = posenc::ReadCheckpoint(in, static_cast<int64_t>(size), "fuzz input");
  } catch (const posenc::Error&) {
    return 0;
  }
  const posenc::ModelWeights& w = ck.weights;
  for (const auto* t : {&w.token_embedding_table, &w.rms_att_weight, &w.wq, &w.wk, &w.wv, &w.wo, &w.rms_ffn_weight,
                        &w.w1, &w.w2, &w.w3, &w.rms_final_weight, &w.wcls}) {
    RequireFinite(*t, "weight");
  }
  const posenc::Llama2cHeader c = ck.config;
  const posenc::Transformer model(
      posenc::LoadLlama2cModel(posenc::MappedFile::FromBytes(std::vector<uint8_t>(data, data + size), "fuzz input")));
  const int64_t n = std::min<int64_t>(c.seq_len, 3);
  std::vector<int> tokens(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) tokens[static_cast<size_t>(t)] = static_cast<int>((t * 7 + 1) % c.vocab_size);
  try {
    posenc::RopeParams p;
    p.head_dim = c.head_dim();
    std::vector<int64_t> positions(static_cast<size_t>(n));
    std::iota(positions.begin(), positions.end(), int64_t{0});
    const posenc::CosSinTable table = posenc::ComputeCosSin(posenc::ComputeRopeFrequencies(p), positions);
    posenc::ForwardRope rope;
    rope.layers.assign(static_cast<size_t>(c.n_layers), posenc::LayerRope{posenc::View(table), nullptr, 1.0f});
    posenc::ForwardState state;
    std::vector<float> logits(static_cast<size_t>(n * c.vocab_size));
    model.Forward(tokens, positions, rope, state, logits.data());
    RequireFinite(logits, "logit of Forward");
    posenc::KvCache cache(posenc::KvCacheMode::kRotated, c.n_layers, n, c.n_kv_heads, c.head_dim());
    std::vector<float> step_logits(static_cast<size_t>(c.vocab_size));
    for (int64_t t = 0; t < std::min<int64_t>(n, 2); ++t) {
      model.DecodeStep(tokens[static_cast<size_t>(t)], t, rope, cache, state, step_logits.data());
      RequireFinite(step_logits, "logit of DecodeStep");
    }
  } catch (const posenc::Error&) {
    return 0;
  }
  return 0;
}
