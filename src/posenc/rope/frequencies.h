// Inverse frequencies and attention factors for every rope type (HF `ROPE_INIT_FUNCTIONS` semantics).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope/params.h"

namespace posenc {

/// The frequency table of one rotary embedding, as Hugging Face's init functions return it.
struct RopeFrequencies {
  std::vector<float> inv_freq;            // [rotary_dim/2], radians/token; pair i turns by pos * inv_freq[i]
  double attention_factor = 1.0;          // multiplies cos and sin (so q.k scales by its square)
  double softmax_scale_multiplier = 1.0;  // multiplies head_dim^-0.5 in attention (DeepSeek-V3 yarn)

  int64_t rotary_dim() const { return static_cast<int64_t>(inv_freq.size()) * 2; }
};

/// How each frequency pair of a yarn or llama3 table was treated.
enum class PairRegime { kKept, kBlended, kInterpolated };

/// Computes inv_freq, attention_factor and the softmax-scale multiplier for `params`.
///
/// Shapes:  inv_freq[rotary_dim/2], float32. Pair i pairs channels (2i, 2i+1) in the interleaved layout and
///          (i, i + rotary_dim/2) in the half-split layout; the table itself is layout-free.
/// seq_len: the sequence length (largest position id + 1, in tokens) of the call. Used only by kDynamic
///          (base grows when seq_len > max_position_embeddings) and kLongrope (long factors when
///          seq_len > original_max_position_embeddings); std::nullopt behaves as HF's init (no seq_len):
///          the base table for dynamic, the short factors for longrope. Pure: no state is kept between calls.
/// Precision: reproduces HF's float32 operation order (exponent fl32(2i)/dim, base rounded to float32,
///          reciprocal in float32), so inv_freq matches HF's float32 run within 1 ulp (tests enforce it).
/// Errors:  everything ValidateRopeParams throws; RangeError if seq_len < 1; ConfigError if a derived
///          quantity is not finite in the type it is used in, naming the inputs it is formed from: an inv_freq
///          entry not a finite positive float32, or so large that position * inv_freq overflows float32 before
///          position 2^40 (ComputeCosSin's limit); attention_factor or the softmax-scale multiplier not a
///          finite positive float32 (e.g. yarn mscale_all_dim = 1e300).
/// Source:  transformers `modeling_rope_utils.py` (v5): `_compute_default_rope_parameters`,
///          `_compute_linear_scaling_rope_parameters`, `_compute_dynamic_ntk_parameters`,
///          `_compute_yarn_parameters`, `_compute_llama3_parameters`, `_compute_longrope_parameters`;
///          kNtk: base * factor^(d/(d-2)) (bloc97, "NTK-aware scaled RoPE", 2023). DeepSeek-V3 softmax
///          multiplier: `DeepseekV3Attention.__init__` (get_mscale(factor, mscale_all_dim)^2).
RopeFrequencies ComputeRopeFrequencies(const RopeParams& params,
                                       std::optional<int64_t> seq_len = std::nullopt);

/// Base frequencies inv_freq_i = fl32(1 / fl32(fl32(rope_theta) ^ fl32(fl32(2i) / rotary_dim))).
/// Shapes: returns [rotary_dim/2]. Errors: ConfigError for odd or < 2 rotary_dim, or rope_theta <= 0.
/// Source: transformers `_compute_default_rope_parameters`, float32 operation order.
std::vector<float> DefaultInvFreq(double rope_theta, int64_t rotary_dim);

/// The dynamic-NTK base for a sequence of seq_len tokens: rope_theta * ((factor * S / L) - (factor - 1))
/// ^ (d / (d - 2)) with S = max(seq_len, L), L = max_position_embeddings, d = rotary_dim (double precision).
/// Equals rope_theta for seq_len <= L. Source: transformers `_compute_dynamic_ntk_parameters`.
double DynamicNtkBase(const RopeParams& params, int64_t seq_len);

/// The YaRN correction range [low, high] in pair-index units, after truncation and clamping to
/// [0, rotary_dim - 1] (HF clamps to dim - 1, not dim/2 - 1). Source: `_compute_yarn_parameters`.
struct YarnRange {
  double low = 0.0;
  double high = 0.0;
};
YarnRange YarnCorrectionRange(const RopeParams& params);

/// Per-pair regime for inspection: yarn (ramp 0 kept, 1 interpolated, else blended) and llama3 (high
/// frequency kept, low frequency interpolated, medium blended). Other types: every pair kKept, except
/// linear (every pair kInterpolated). Shapes: returns [rotary_dim/2].
std::vector<PairRegime> PairRegimes(const RopeParams& params);

/// "kept", "blended" or "interpolated".
const char* PairRegimeName(PairRegime regime);

}  // namespace posenc
