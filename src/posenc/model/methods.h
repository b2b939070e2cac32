// The RoPE extension methods the model runs under (`posenc eval` step 3, `posenc generate`), mapped onto
// posenc/rope.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/attention/pre_rotation.h"
#include "posenc/model/config.h"
#include "posenc/model/transformer.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/params.h"

namespace posenc {

/// A way of running the model at context length L past its training length L0.
enum class EvalMethod {
  kNone,       // plain RoPE, base rope_theta
  kLinear,     // position interpolation: positions / s
  kNtk,        // static NTK-aware: base * s^(d/(d-2))
  kYarn,       // YaRN (HF semantics: beta_fast 32, beta_slow 1, truncate, attention factor 0.1 ln s + 1)
  kDynamic,    // dynamic NTK, pre-rotation: query row p uses base(p+1) on q_p and on every key
  kDynamicHf,  // dynamic NTK, rotated cache: q_p and k_p both use base(p+1), keys keep their own step's
  kLlama3,     // Llama 3.1 band-wise scaling (parameters from the user)
  kLongrope,   // LongRoPE short/long factors (parameters from the user)
  kNative,     // the RoPE exactly as the model file specifies it (its own scaling, rope_freqs factors)
};

/// "none", "linear", "ntk", "yarn", "dynamic", "dynamic-hf", "llama3", "longrope", "native".
std::string_view EvalMethodName(EvalMethod method);

/// Parses one method name. Errors: ConfigError "unknown method 'x' (expected one of none, linear, ...)".
EvalMethod ParseEvalMethod(std::string_view name);

/// The six methods of the protocol, in the default order of `posenc eval`.
std::vector<EvalMethod> DefaultEvalMethods();

/// Everything about the methods that the user may set.
struct MethodOptions {
  std::optional<double> factor;         // fixes s for every scaled method instead of max(1, L/L0)
  std::optional<RopeParams> llama3;     // rope_type kLlama3 with low/high_freq_factor (factor may be unset)
  std::optional<RopeParams> longrope;   // rope_type kLongrope with short/long_factor (factor may be unset)
};

/// The RoPE of one (method, ctx) evaluation, owning its tables.
struct MethodRope {
  EvalMethod method = EvalMethod::kNone;
  int64_t ctx = 0;                   // window length L, tokens
  double factor = 1.0;               // the scaling factor handed to the library (1 for none)
  RopeParams params;                 // the library parameters (for dynamic: those of every row)
  CosSinTable table;                 // [ctx, half]: row t rotates q_t and k_t (folded attention_factor)
  std::unique_ptr<PreRotationTables> pre_rotation;  // kDynamic only
  float softmax_scale_multiplier = 1.0f;

  /// The view a Transformer::Forward call takes. Valid while this object lives.
  ForwardRope forward() const { return {View(table), pre_rotation.get(), softmax_scale_multiplier}; }
};

/// The RoPE parameters of `method` for windows of `ctx` tokens (see BuildMethodRope for each method's);
/// nothing is computed. Errors: ConfigError if ctx < 1, options.factor < 1, llama3/longrope is asked for
/// without its parameters, or their head_dim differs from the model's.
RopeParams MethodRopeParams(EvalMethod method, int64_t ctx, const LlamaConfig& config,
                            const MethodOptions& options = {});

/// Everything BuildMethodRope would refuse, without building the tables: MethodRopeParams, then the
/// frequencies (validated, finite) for a sequence of 1 and of ctx tokens. Cheap (O(rotary_dim)), so a run
/// can check every (method, ctx) pair before its first forward pass.
/// Errors: as MethodRopeParams and ComputeRopeFrequencies.
void ValidateMethodRope(EvalMethod method, int64_t ctx, const LlamaConfig& config,
                        const MethodOptions& options = {});

/// Builds the tables of `method` for windows of `ctx` tokens of a model. Every method but native scales the
/// model's base RoPE: config.rope.rope_theta, head_dim and rotary_dim (partial rotary) from the file, no scaling
/// of its own and no rope_freqs factors, with L0 = config.train_ctx (the file's training length, or the user's
/// override) and s = options.factor or max(1, ctx / L0):
///   none: kDefault.  linear: kLinear, factor s.  ntk: kNtk, factor s.
///   yarn: kYarn, factor s, original_max_position_embeddings = max_position_embeddings = L0.
///   dynamic-hf: kDynamic (factor = options.factor or 1, max_position_embeddings = L0); row t uses
///     ComputeRopeFrequencies(params, seq_len = t + 1) at position t.
///   dynamic: the same frequencies per query row p, applied to q_p and every key (PreRotationTables);
///     rows whose frequencies equal the base ones use the static table.
///   llama3: options.llama3 (factor s unless the params carry one or options.factor is set).
///   longrope: options.longrope, frequencies for seq_len = ctx (long factors when ctx > L0).
///   native: config.rope as the file gives it (any rope type; dynamic as dynamic-hf; longrope at seq_len = ctx),
///     each inv_freq[i] divided by config.rope_freq_factors[i] when the file has them (llama.cpp rope_freqs).
/// Angles: RopePrecision::kExact from the library's float32 inv_freq (HF semantics).
/// Errors:  ConfigError if ctx < 1, options.factor < 1, llama3/longrope is asked for without its
///          parameters, or their head_dim differs from the model's; everything ComputeRopeFrequencies throws.
MethodRope BuildMethodRope(EvalMethod method, int64_t ctx, const LlamaConfig& config,
                           const MethodOptions& options = {});

}  // namespace posenc
