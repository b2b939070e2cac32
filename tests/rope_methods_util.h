// RoPE tables of the context-extension methods for the training tests: what a fine-tuning run at ctx tokens past a
// training length L0 would hand the attention layer (built with the rope library, as the eval methods are).
#pragma once

#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "posenc/attention/pre_rotation.h"
#include "posenc/model/layers/self_attention.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"

namespace posenc::testing {

/// A method's RoPE for windows of ctx tokens, owning its tables.
struct MethodTables {
  std::string name;
  CosSinTable table;
  std::unique_ptr<PreRotationTables> pre_rotation;
  double softmax_scale_multiplier = 1.0;
  RopeLayout layout = RopeLayout::kInterleaved;

  AttentionRope rope() const { return {View(table), layout, pre_rotation.get(), softmax_scale_multiplier}; }
};

/// "none" (base RoPE), "linear", "ntk", "yarn" (factor ctx / L0, attention_factor folded), "dynamic" (pre-rotation:
/// rows p >= L0 use the dynamic-NTK frequencies of length p + 1 on q_p and every key). rotary_dim = 2 * half.
inline MethodTables BuildMethod(const std::string& method, int64_t head_dim, int64_t half, int64_t ctx, int64_t L0,
                                RopeLayout layout = RopeLayout::kInterleaved) {
  MethodTables m;
  m.name = method;
  m.layout = layout;
  RopeParams p;
  p.head_dim = head_dim;
  p.rotary_dim = 2 * half;
  const double s = static_cast<double>(ctx) / static_cast<double>(L0);
  if (method == "linear") {
    p.rope_type = RopeType::kLinear;
    p.factor = s;
  } else if (method == "ntk") {
    p.rope_type = RopeType::kNtk;
    p.factor = s;
  } else if (method == "yarn") {
    p.rope_type = RopeType::kYarn;
    p.factor = s;
    p.original_max_position_embeddings = L0;
    p.max_position_embeddings = L0;
  } else if (method == "dynamic") {
    p.rope_type = RopeType::kDynamic;
    p.factor = s;
    p.max_position_embeddings = L0;
  }
  std::vector<int64_t> positions(static_cast<size_t>(ctx));
  std::iota(positions.begin(), positions.end(), int64_t{0});
  const RopeFrequencies f = ComputeRopeFrequencies(p, method == "dynamic" ? std::optional<int64_t>(1) : std::nullopt);
  m.table = ComputeCosSin(f, positions);
  m.softmax_scale_multiplier = f.softmax_scale_multiplier;
  if (method == "dynamic") {
    std::vector<RopeFrequencies> rows;
    for (int64_t t = 0; t < ctx; ++t) rows.push_back(ComputeRopeFrequencies(p, t + 1));
    m.pre_rotation = std::make_unique<PreRotationTables>(PreRotationTables::Build(rows, f));
  }
  return m;
}

}  // namespace posenc::testing
