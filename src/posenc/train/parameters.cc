#include "posenc/train/parameters.h"

#include <fmt/format.h>

#include <limits>

#include "posenc/core/errors.h"
#include "posenc/train/config.h"

namespace posenc {

int64_t ParameterTensor::size() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

ParameterLayout::ParameterLayout(const ModelConfig& c) {
  CheckTrainable(c, "model config");
  const int64_t C = c.dim, F = c.hidden_dim, V = c.vocab_size, Q = c.q_dim(), K = c.kv_dim();
  auto add = [&](std::string name, int64_t layer, std::vector<int64_t> shape) {
    ParameterTensor t{std::move(name), layer, total_, std::move(shape), false};
    t.decay = t.shape.size() >= 2;
    int64_t n = 1;
    for (int64_t d : t.shape) {
      if (n > std::numeric_limits<int64_t>::max() / 4 / d) {
        throw ConfigError(fmt::format("parameter {} is too large for one buffer", t.name));
      }
      n *= d;
    }
    if (total_ > std::numeric_limits<int64_t>::max() / 4 - n) {
      throw ConfigError("the model's parameters do not fit in one buffer (more than 2^61 elements)");
    }
    total_ += n;
    tensors_.push_back(std::move(t));
  };
  add("token_embd.weight", -1, {V, C});
  if (c.absolute_positions == AbsolutePositions::kLearned) add("position_embd.weight", -1, {c.n_positions, C});
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    add(b + "attn_norm.weight", l, {C});
    add(b + "attn_q.weight", l, {Q, C});
    add(b + "attn_k.weight", l, {K, C});
    add(b + "attn_v.weight", l, {K, C});
    if (c.attn_qkv_bias) {
      add(b + "attn_q.bias", l, {Q});
      add(b + "attn_k.bias", l, {K});
      add(b + "attn_v.bias", l, {K});
    }
    if (c.qk_norm == QkNorm::kPerHead) {
      add(b + "attn_q_norm.weight", l, {c.head_dim});
      add(b + "attn_k_norm.weight", l, {c.head_dim});
    }
    add(b + "attn_output.weight", l, {C, Q});
    add(b + "ffn_norm.weight", l, {C});
    add(b + "ffn_gate.weight", l, {F, C});
    add(b + "ffn_up.weight", l, {F, C});
    add(b + "ffn_down.weight", l, {C, F});
  }
  add("output_norm.weight", -1, {C});
  if (!c.tied_embeddings) add("output.weight", -1, {V, C});
}

const ParameterTensor& ParameterLayout::Find(std::string_view name) const {
  for (const ParameterTensor& t : tensors_) {
    if (t.name == name) return t;
  }
  throw ConfigError(fmt::format("the model has no parameter tensor named '{}'", name));
}

const ParameterTensor& ParameterLayout::At(int64_t index) const {
  if (index < 0 || index >= total_) {
    throw RangeError(fmt::format("parameter index {} is outside [0, {})", index, total_));
  }
  for (const ParameterTensor& t : tensors_) {
    if (index < t.offset + t.size()) return t;
  }
  return tensors_.back();  // unreachable: the tensors cover [0, total_)
}

template <typename T>
ParameterTensors<T> MakeParameterViews(const ModelConfig& c, const ParameterLayout& layout, T* base) {
  auto at = [&](const std::string& name) { return base + layout.Find(name).offset; };
  ParameterTensors<T> v;
  v.token_embd = at("token_embd.weight");
  if (c.absolute_positions == AbsolutePositions::kLearned) v.position_embd = at("position_embd.weight");
  for (int64_t l = 0; l < c.n_layers; ++l) {
    const std::string b = fmt::format("blk.{}.", l);
    LayerParameters<T> t;
    t.attn_norm = at(b + "attn_norm.weight");
    t.wqkv = at(b + "attn_q.weight");
    if (c.attn_qkv_bias) t.bqkv = at(b + "attn_q.bias");
    if (c.qk_norm == QkNorm::kPerHead) {
      t.q_norm = at(b + "attn_q_norm.weight");
      t.k_norm = at(b + "attn_k_norm.weight");
    }
    t.wo = at(b + "attn_output.weight");
    t.ffn_norm = at(b + "ffn_norm.weight");
    t.w_gate_up = at(b + "ffn_gate.weight");
    t.w_down = at(b + "ffn_down.weight");
    v.layers.push_back(t);
  }
  v.output_norm = at("output_norm.weight");
  v.output = c.tied_embeddings ? v.token_embd : at("output.weight");
  return v;
}

template ParameterTensors<float> MakeParameterViews<float>(const ModelConfig&, const ParameterLayout&, float*);
template ParameterTensors<double> MakeParameterViews<double>(const ModelConfig&, const ParameterLayout&, double*);
template ParameterTensors<const float> MakeParameterViews<const float>(const ModelConfig&, const ParameterLayout&,
                                                                       const float*);
template ParameterTensors<const double> MakeParameterViews<const double>(const ModelConfig&,
                                                                         const ParameterLayout&, const double*);

}  // namespace posenc
