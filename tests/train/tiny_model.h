// The tiny model shape of the training tests: 2 layers, 4 query heads sharing 2 kv heads of head_dim 8 (GQA),
// dim 32, hidden 40, vocab 48, windows of 12 tokens.
#pragma once

#include "posenc/train/config.h"

namespace posenc::testing {

inline constexpr int64_t kTinyCtx = 12;

inline TrainShape TinyTrainConfig(PositionEncoding pe = PositionEncoding::kRope, bool attention_bias = false,
                                        bool tied_embeddings = true) {
  TrainShape c;
  c.dim = 32;
  c.hidden_dim = 40;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = 48;
  c.max_seq_len = kTinyCtx;
  c.position_encoding = pe;
  c.attention_bias = attention_bias;
  c.tied_embeddings = tied_embeddings;
  return c;
}

/// The training model's ModelConfig of a shape (as TrainModel(shape) builds it).
inline ModelConfig ModelOf(const TrainShape& shape) { return ToModelConfig(shape, shape.max_seq_len); }

}  // namespace posenc::testing
