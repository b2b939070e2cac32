// The parameters of a training model as ONE flat float buffer with named views (llm.c's ParameterTensors), and
// the gradients in a second buffer of the same layout. Optimizers, clipping and checks walk the flat buffer;
// layers take the named views.
//
// Legend: D head_dim, C dim, F hidden_dim, V vocab_size, Q = n_heads * head_dim, K = n_kv_heads * head_dim, P n_positions.
// Tensors in buffer order, named as in GGUF (llama2.c / HF names in the comments), each row-major [out, in]:
//   token_embd.weight        [V, C]   token_embedding_table / embed_tokens
//   position_embd.weight     [P, C]   learned positions only (GPT-2 wpe)
//   per block N = 0 .. n_layers-1:
//     blk.N.attn_norm.weight   [C]      rms_att_weight / input_layernorm
//     blk.N.attn_q.weight      [Q, C]   wq / q_proj   } contiguous: one [Q + 2K, C] matrix computes q | k | v
//     blk.N.attn_k.weight      [K, C]   wk / k_proj   }
//     blk.N.attn_v.weight      [K, C]   wv / v_proj   }
//     blk.N.attn_q.bias        [Q]      attn_qkv_bias only  } contiguous: one [Q + 2K] bias
//     blk.N.attn_k.bias        [K]                          }
//     blk.N.attn_v.bias        [K]                          }
//     blk.N.attn_q_norm.weight [D]      q_norm: per-head q/k RMSNorm only (Qwen3)
//     blk.N.attn_k_norm.weight [D]      k_norm
//     blk.N.attn_output.weight [C, Q]   wo / o_proj
//     blk.N.ffn_norm.weight    [C]      rms_ffn_weight / post_attention_layernorm
//     blk.N.ffn_gate.weight    [F, C]   w1 / gate_proj } contiguous: one [2F, C] matrix computes gate | up
//     blk.N.ffn_up.weight      [F, C]   w3 / up_proj   }
//     blk.N.ffn_down.weight    [C, F]   w2 / down_proj
//   output_norm.weight       [C]      rms_final_weight / norm
//   output.weight            [V, C]   wcls / lm_head; absent when tied (the classifier is token_embd)
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/model/config.h"

namespace posenc {

/// One named tensor of the flat buffer.
struct ParameterTensor {
  std::string name;            // GGUF name, e.g. "blk.3.attn_q.weight"
  int64_t layer = -1;          // block index; -1 outside the blocks (embeddings, final norm, classifier)
  int64_t offset = 0;          // elements from the start of the buffer
  std::vector<int64_t> shape;  // row-major
  bool decay = false;          // AdamW weight decay applies: matrices and embeddings yes, norms and biases no
                               // (nanoGPT's rule: every tensor of rank >= 2 decays)
  int64_t size() const;
};

/// Where every tensor of a config's model sits in the flat buffer (the order of the file comment).
class ParameterLayout {
 public:
  /// Errors: ConfigError from CheckTrainable; ConfigError if the total does not fit in int64.
  explicit ParameterLayout(const ModelConfig& config);

  const std::vector<ParameterTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }  // elements of the buffer
  /// The tensor with this name. Errors: ConfigError naming it if there is none.
  const ParameterTensor& Find(std::string_view name) const;
  /// The tensor holding flat element `index` (0 <= index < total()). Errors: RangeError otherwise.
  const ParameterTensor& At(int64_t index) const;

 private:
  std::vector<ParameterTensor> tensors_;
  int64_t total_ = 0;
};

/// Views of one block's tensors (shapes in the file comment); the fused pointers are the first of their group.
template <typename T>
struct LayerParameters {
  T* attn_norm = nullptr;  // [C]
  T* wqkv = nullptr;       // [Q + 2K, C] = wq | wk | wv
  T* bqkv = nullptr;       // [Q + 2K] = bq | bk | bv, or nullptr without attn_qkv_bias
  T* q_norm = nullptr;     // [D] per-head q RMSNorm weight, or nullptr without qk_norm
  T* k_norm = nullptr;     // [D] per-head k RMSNorm weight, or nullptr without qk_norm
  T* wo = nullptr;         // [C, Q]
  T* ffn_norm = nullptr;   // [C]
  T* w_gate_up = nullptr;  // [2F, C] = w1 (gate) | w3 (up)
  T* w_down = nullptr;     // [C, F] (w2)
};

/// Views of every tensor of a flat buffer laid out by a ParameterLayout.
template <typename T>
struct ParameterTensors {
  T* token_embd = nullptr;     // [V, C]
  T* position_embd = nullptr;  // [P, C] with learned positions, else nullptr
  std::vector<LayerParameters<T>> layers;
  T* output_norm = nullptr;    // [C]
  T* output = nullptr;         // [V, C]; equals token_embd when tied
};

/// Named views into `base` (a buffer of layout.total() elements). Errors: none.
template <typename T>
ParameterTensors<T> MakeParameterViews(const ModelConfig& config, const ParameterLayout& layout, T* base);

}  // namespace posenc
