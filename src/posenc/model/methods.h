// The RoPE extension methods the model runs under (`posenc eval` step 3, `posenc generate`), mapped onto
// posenc/rope per layer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention/pre_rotation.h"
#include "posenc/model/block.h"
#include "posenc/model/config.h"
#include "posenc/model/position_maps.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/params.h"

namespace posenc {

/// A way of running the model at context length L past its training length L0.
enum class RopeMethod {
  kNone,       // plain RoPE, base rope_theta
  kLinear,     // position interpolation: positions / s
  kNtk,        // static NTK-aware: base * s^(d/(d-2))
  kYarn,       // YaRN (HF semantics: beta_fast 32, beta_slow 1, truncate, attention factor 0.1 ln s + 1)
  kDynamic,    // dynamic NTK, pre-rotation: query row p uses base(p+1) on q_p and on every key
  kDynamicHf,  // dynamic NTK, rotated cache: q_p and k_p both use base(p+1), keys keep their own step's
  kLlama3,     // Llama 3.1 band-wise scaling (parameters from the user)
  kLongrope,   // LongRoPE short/long factors (parameters from the user)
  kNative,     // the RoPE exactly as the model file specifies it (its own scaling, rope_freqs factors)
  // Training-free position maps over the file's own RoPE (model/position_maps.h):
  kSelfExtend,   // Self-Extend: grouped positions past a neighbour window
  kDualChunk,    // Dual Chunk Attention: intra-, successive- and inter-chunk positions
  kReRope,       // ReRoPE: distances capped at a window
  kLeakyReRope,  // Leaky ReRoPE: distances past a window grow 1/leak per token
  kSinks,        // attention sinks (StreamingLLM): sink tokens + a recent window, cache positions
  kLmInfinite,   // LM-Infinite: Lambda mask, distances capped at the window
};

/// "none", "linear", "ntk", "yarn", "dynamic", "dynamic-hf", "llama3", "longrope", "native", "self-extend",
/// "dca", "rerope", "leaky-rerope", "sinks", "lm-infinite".
std::string_view RopeMethodName(RopeMethod method);

/// Parses one method name. Errors: ConfigError "unknown method 'x' (expected one of none, linear, ...)".
RopeMethod ParseRopeMethod(std::string_view name);

/// True for the position-map methods (kSelfExtend, kDualChunk, kReRope .. kLmInfinite): they keep the file's RoPE and change which
/// positions q and k are rotated at per (query, key) pair.
bool IsPositionMap(RopeMethod method);

/// The six methods of the protocol, in the default order of `posenc eval`.
std::vector<RopeMethod> DefaultRopeMethods();

/// YaRN's parameters as a user sets them (HF rope_scaling keys; unset: HF's defaults, beta_fast 32, beta_slow 1,
/// attention factor 0.1 ln s + 1). What each does: rope/params.h.
struct YarnOptions {
  std::optional<double> beta_fast, beta_slow;        // rotation counts bounding the ramp
  std::optional<double> mscale, mscale_all_dim;      // DeepSeek's attention-factor pair
  std::optional<double> attention_factor;            // explicit cos/sin multiplier
  bool no_truncate = false;                          // keep the correction range fractional (HF truncate: false)
  bool any() const { return beta_fast || beta_slow || mscale || mscale_all_dim || attention_factor || no_truncate; }
};

/// Everything about the methods that the user may set.
struct MethodOptions {
  std::optional<double> factor;         // fixes s for every scaled method instead of max(1, L/L0)
  std::optional<RopeParams> llama3;     // rope_type kLlama3 with low/high_freq_factor (factor may be unset)
  std::optional<RopeParams> longrope;   // rope_type kLongrope with short/long_factor (factor may be unset)
  YarnOptions yarn;                     // yarn's parameters (unset: HF's defaults)
  PositionMapOptions position_map;      // the position-map methods' parameters (unset: their defaults)
};

/// The RoPE of one (method, ctx) evaluation, owning its tables: one table (and for dynamic, pre-rotation
/// tables) per distinct positional spec among the layers, and per layer the one it uses.
struct MethodRope {
  RopeMethod method = RopeMethod::kNone;
  int64_t ctx = 0;                   // window length L, tokens
  double factor = 1.0;               // the scaling factor handed to the library (1 for none)
  RopeParams params;                 // the library parameters of the primary RoPE layer (PrimaryRopeLayer)
  std::vector<CosSinTable> tables;   // [n_tables][n_rows, half]: row p rotates q and k at position p
                                     // (attention_factor and the file's magnitude folded in)
  std::vector<std::unique_ptr<PreRotationTables>> pre_rotations;  // [n_tables]: dynamic's rows, else null
  std::vector<float> multipliers;    // [n_tables]: softmax-scale multiplier of each table's frequencies
  std::vector<RopeFrequencies> frequencies;  // [n_tables]: each static table's frequencies (a dynamic table's at
                                             // seq_len 1), attention_factor included
  std::vector<double> magnitudes;    // [n_tables]: the file's magnitude multiplied into each table (native)
  std::shared_ptr<const PositionMap> position_map;  // position-map methods: the map; else null
  std::vector<bool> layer_mapped;    // [n_layers]: the layer attends through position_map
  std::vector<int> layer_table;      // [n_layers]: index into tables, -1 for a layer without RoPE
  double absolute_scale = 1.0;       // learned absolute positions read at p / absolute_scale (linear)

  /// The per-layer views a Transformer forward takes. Valid while this object lives.
  ForwardRope forward() const;
  /// The table of the layers with RoPE when they all share one (models whose layers do not differ, as training
  /// builds them). Errors: ConfigError if no layer has RoPE or layers use different tables.
  int UniformTable() const;
  /// The uniform table, its pre-rotation rows (or null) and multiplier (UniformTable; same errors).
  const CosSinTable& table() const { return tables[static_cast<size_t>(UniformTable())]; }
  const PreRotationTables* pre_rotation() const { return pre_rotations[static_cast<size_t>(UniformTable())].get(); }
  float softmax_scale_multiplier() const { return multipliers[static_cast<size_t>(UniformTable())]; }
};

/// The RoPE parameters of `method` for windows of `ctx` tokens applied to one layer's own RoPE `layer`
/// (its rope_theta, head_dim, rotary_dim; L0 = config.train_ctx): see BuildMethodRope; nothing is computed.
/// Errors: ConfigError if ctx < 1, options.factor < 1, llama3/longrope is asked for without its parameters, or
/// their head_dim differs from the model's.
RopeParams MethodRopeParams(RopeMethod method, int64_t ctx, const ModelConfig& config, const RopeParams& layer,
                            const MethodOptions& options = {});

/// Everything BuildMethodRope would refuse, without building the tables: the method's meaning for the model
/// (absolute positions, no RoPE at all), MethodRopeParams of every distinct scaled layer, then the frequencies
/// (validated, finite) for a sequence of 1 and of ctx tokens. Cheap (O(rotary_dim) per layer spec).
/// Errors: as MethodRopeParams and ComputeRopeFrequencies; ConfigError for a method other than none / native /
///   linear on a model with learned absolute positions (linear interpolates the table), other than none /
///   native on sinusoidal or position-free models, or a RoPE scaling method on a model without any RoPE layer.
void ValidateMethodRope(RopeMethod method, int64_t ctx, const ModelConfig& config,
                        const MethodOptions& options = {});

/// Builds the tables of `method` for windows of `ctx` tokens (rows for positions [0, n_rows), n_rows = ctx when
/// 0). Which layers a method scales: every layer with RoPE, except that in a model with both sliding-window and
/// full-attention RoPE layers (Gemma 2/3, Qwen2 with max_window_layers) the sliding ones keep the file's own
/// RoPE (their window never reaches past L0; Gemma 3's long context is the global layers' scaling). NoPE layers
/// stay without RoPE. A scaled layer gets its own base RoPE scaled: rope_theta, head_dim and rotary_dim from
/// the file, no scaling of its own and no rope_freqs factors, with L0 = config.train_ctx (the file's training
/// length, or the user's override) and s = options.factor or max(1, ctx / L0):
///   none: kDefault.  linear: kLinear, factor s.  ntk: kNtk, factor s.
///   yarn: kYarn, factor s, original_max_position_embeddings = max_position_embeddings = L0, and the set fields
///     of options.yarn (beta_fast, beta_slow, mscale, mscale_all_dim, attention_factor; truncate false with
///     no_truncate).
///   dynamic-hf: kDynamic (factor = options.factor or 1, max_position_embeddings = L0); row t uses
///     ComputeRopeFrequencies(params, seq_len = t + 1) at position t.
///   dynamic: the same frequencies per query row p, applied to q_p and every key (PreRotationTables);
///     rows whose frequencies equal the base ones use the static table.
///   llama3: options.llama3 (factor s unless the params carry one or options.factor is set).
///   longrope: options.longrope, frequencies for seq_len = ctx (long factors when ctx > L0).
///   native: every layer's RoPE as the file gives it (any rope type; dynamic as dynamic-hf; longrope at seq_len =
///     ctx), each inv_freq[i] divided by the layer's rope_freq_factors[i] (llama.cpp rope_freqs), cos and sin
///     times its rope_magnitude.
///   self-extend, dca, rerope, leaky-rerope, sinks, lm-infinite: native tables, and MakePositionMap(name,
///     options.position_map, ctx, L0) on the layers a scaling method would change (the rule above); those
///     layers' native RoPE must be static (not dynamic). dca's chunk_size / local_size, where the user left
///     them unset, are the file's dual_chunk_attention_config (config.dual_chunk) when it has one.
/// Learned absolute positions: none and native read the table as it is, linear at p / s.
/// Angles: RopePrecision::kExact from the library's float32 inv_freq (HF semantics).
/// Errors:  as ValidateMethodRope; everything ComputeRopeFrequencies throws.
MethodRope BuildMethodRope(RopeMethod method, int64_t ctx, const ModelConfig& config,
                           const MethodOptions& options = {}, int64_t n_rows = 0);

/// The tables of dynamic NTK at one decode step: every scaled layer's frequencies for a sequence of seq_len
/// tokens (the method's own parameters, as BuildMethodRope's dynamic), rows [0, seq_len); other layers as
/// BuildMethodRope. What a pre-rotation (unrotated) KV cache rotates every key with at that step.
/// Errors: as BuildMethodRope.
MethodRope BuildDynamicStepRope(int64_t seq_len, const ModelConfig& config,
                                const MethodOptions& options = {});

}  // namespace posenc
