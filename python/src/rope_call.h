// RoPE over N-d NumPy arrays / torch tensors: maps Hugging Face's broadcasting convention (cos/sin of shape
// [..., seq, rotary_dim], unsqueezed at the heads axis of q and k) onto the library's strided [tokens, heads,
// head_dim] views, one library call per run of tokens whose strides line up.
#pragma once

#include <cstdint>
#include <optional>

#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/layout.h"
#include "tensor_arg.h"

namespace posenc::python {

/// What every rotation call shares.
struct RopeCallOptions {
  RopeLayout layout = RopeLayout::kHalfSplit;
  RopeDirection direction = RopeDirection::kForward;
  int64_t unsqueeze_dim = 1;             // the heads axis of q and k, as HF's apply_rotary_pos_emb names it
  std::optional<int64_t> rotary_dim;     // expected rotary_dim, checked against cos / the frequencies if given
};

/// Rotates q and k (k may be null) with HF-format cos/sin: out = q * cos + rotate(q) * sin for the layout's
/// pairs, cos/sin broadcast as cos.unsqueeze(unsqueeze_dim) against q. cos and sin must repeat their first
/// half (cat(freqs, freqs), as HF's rotary embeddings return them) so each pair turns by one angle; channels
/// [cos.shape[-1], head_dim) pass through. In place when q_out/k_out are null, else into them (same shapes and
/// dtypes, any strides; an input that repeats memory, an expanded tensor, is then read through a dense copy).
/// Errors: TypeError/ValueError naming the argument for every shape, dtype, stride or content condition; posenc
/// exceptions from the library's own checks.
void RotateWithTable(const TensorArg& q, const TensorArg* k, const TensorArg* q_out, const TensorArg* k_out,
                     const TensorArg& cos, const TensorArg& sin, const RopeCallOptions& options);

/// Rotates q and k (k may be null) in place by position ids (broadcast against the token axes of q and k, i.e.
/// every axis but the heads axis and the last), cos/sin computed inside the kernel from `freqs`.
void RotateWithPositions(const TensorArg& q, const TensorArg* k, const TensorArg& position_ids,
                         const RopeFrequencies& freqs, RopePrecision precision, const RopeCallOptions& options);

/// The values of an int64/int32 array in row-major order. Errors: TypeError naming the argument otherwise.
std::vector<int64_t> GatherInts(const TensorArg& t);

}  // namespace posenc::python
