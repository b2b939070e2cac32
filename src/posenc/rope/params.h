// RoPE parameters: what a model's config says about its rotary embedding, validated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace posenc {

/// The rope types of Hugging Face transformers' ROPE_INIT_FUNCTIONS, plus kNtk (static NTK-aware scaling).
enum class RopeType {
  kDefault,   // inv_freq_i = rope_theta^(-2i/rotary_dim)
  kLinear,    // position interpolation (Chen et al. 2023): inv_freq / factor
  kNtk,       // static NTK-aware (bloc97 2023): rope_theta' = rope_theta * factor^(d/(d-2)); not an HF type
  kDynamic,   // dynamic NTK: the NTK base grows with the sequence length (HF "dynamic")
  kYarn,      // YaRN (Peng et al. 2023): NTK-by-parts ramp + attention temperature
  kLlama3,    // Llama 3.1 band-wise frequency scaling
  kLongrope,  // LongRoPE (Ding et al. 2024; Phi-3): per-pair rescale factors, short/long sets
};

/// "default", "linear", "ntk", "dynamic", "yarn", "llama3" or "longrope".
std::string_view RopeTypeName(RopeType type);

/// Parses a rope type name as HF spells it ("rope_type" or the legacy "type"; "su" and "mrope" aliases are
/// not accepted). Errors: ConfigError("rope_type must be one of ..., got 'x'") for anything else.
RopeType ParseRopeType(std::string_view name);

/// Every field of a rotary embedding as Hugging Face's `rope_parameters` (v5) / `rope_scaling` (v4) carry it,
/// after standardisation. Optional fields are std::nullopt when the config did not give them; the functions
/// in frequencies.h apply HF's defaults. Build it by hand or with ParseHfRopeConfig (rope/hf_config.h).
///
/// Units: rope_theta is the base (dimensionless); *_position_embeddings are token counts; factor and the
/// *_freq_factor values are dimensionless ratios; beta_fast / beta_slow are rotation counts.
struct RopeParams {
  RopeType rope_type = RopeType::kDefault;
  double rope_theta = 10000.0;                 // base of the geometric frequency ladder
  int64_t head_dim = 0;                        // channels per attention head
  int64_t rotary_dim = 0;                      // rotated channels [0, rotary_dim); 0 means head_dim
  int64_t max_position_embeddings = 0;         // L: the (post-extension) context length; 0 = unknown
  std::optional<double> factor;                // scaling factor s
  std::optional<int64_t> original_max_position_embeddings;  // L0: pre-extension training length
  // yarn
  std::optional<double> attention_factor;      // explicit cos/sin multiplier (yarn, longrope); wins when set
  std::optional<double> beta_fast;             // yarn: default 32 (0 counts as unset, as HF's `or`)
  std::optional<double> beta_slow;             // yarn: default 1 (0 counts as unset)
  std::optional<double> mscale;                // yarn (DeepSeek): 0 counts as unset
  std::optional<double> mscale_all_dim;        // yarn (DeepSeek): also sets the softmax-scale multiplier
  bool truncate = true;                        // yarn: floor/ceil the correction range (gpt-oss: false)
  // llama3
  std::optional<double> low_freq_factor;
  std::optional<double> high_freq_factor;
  // longrope
  std::vector<double> short_factor;            // [rotary_dim/2]
  std::vector<double> long_factor;             // [rotary_dim/2]

  /// rotary_dim if set, else head_dim.
  int64_t RotaryDim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
};

/// Largest head_dim (and so rotary_dim) accepted: real models use 64-256 channels per head (DeepSeek MLA 576);
/// the bound keeps a typo (9e15) from becoming an allocation of petabytes.
inline constexpr int64_t kMaxHeadDim = 65536;

/// Checks every field that the rope type uses; HF only warns about most of these, posenc refuses them.
/// Values used in float32 (rope_theta, factor, the longrope factor lists) are checked in float32: a value
/// that is finite and positive as a double but 0 or inf in float32 is refused, naming the field.
///
/// Errors (ConfigError; the message names field and value):
///   head_dim <= 0 or > kMaxHeadDim (the message gives the memory it would need); rotary_dim odd, < 2 or >
///   head_dim; rope_theta not finite in float32 or <= 1 (which makes every frequency 1 or grow with i);
///   factor missing where required (linear, ntk, dynamic, llama3), not finite in float32 or < 1, including
///   the implicit yarn / longrope factor max_position_embeddings / original_max_position_embeddings (an
///   explicit factor below 1 is refused, so an implied one is too); original_max_position_embeddings < 1
///   (yarn, llama3, longrope); yarn beta_fast /
///   beta_slow / mscale / mscale_all_dim / attention_factor negative or not finite; llama3
///   low_freq_factor / high_freq_factor <= 0 or high_freq_factor <= low_freq_factor; longrope factor lists
///   missing, of a length other than rotary_dim/2, or with an entry that is <= 0 or not finite in float32
///   (1e-300 is 0 there); dynamic without max_position_embeddings.
/// Source: transformers `RotaryEmbeddingConfigMixin` validation (v5), turned from warnings into errors.
void ValidateRopeParams(const RopeParams& params);

}  // namespace posenc
