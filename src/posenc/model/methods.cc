#include "posenc/model/methods.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/rope/frequencies.h"

namespace posenc {
namespace {

constexpr RopePrecision kPrecision = RopePrecision::kExact;

struct NamedMethod {
  EvalMethod method;
  std::string_view name;
};
constexpr NamedMethod kMethods[] = {
    {EvalMethod::kNone, "none"},         {EvalMethod::kLinear, "linear"},  {EvalMethod::kNtk, "ntk"},
    {EvalMethod::kYarn, "yarn"},         {EvalMethod::kDynamic, "dynamic"}, {EvalMethod::kDynamicHf, "dynamic-hf"},
    {EvalMethod::kLlama3, "llama3"},     {EvalMethod::kLongrope, "longrope"}, {EvalMethod::kNative, "native"},
};

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

RopeParams UserParams(const std::optional<RopeParams>& p, EvalMethod method, const LlamaConfig& config) {
  if (!p) {
    throw ConfigError(fmt::format("method '{}' needs its parameters: an HF-style --config with rope_type {}, or "
                                  "the {} flags", EvalMethodName(method), EvalMethodName(method),
                                  EvalMethodName(method)));
  }
  RopeParams params = *p;
  if (params.head_dim == 0) params.head_dim = config.head_dim;
  if (params.head_dim != config.head_dim) {
    throw ConfigError(fmt::format("method '{}': head_dim must equal the model's ({}), got {}",
                                  EvalMethodName(method), config.head_dim, params.head_dim));
  }
  if (params.rotary_dim == 0) params.rotary_dim = config.rope.rotary_dim;
  if (!params.original_max_position_embeddings) params.original_max_position_embeddings = config.train_ctx;
  return params;
}

// llama.cpp's rope_freqs.weight (Llama 3.1 GGUF files): pair i turns with inv_freq[i] / factor[i]
// (ggml_rope_ext's freq_factors), in float32 as ggml divides.
void ApplyFreqFactors(const LlamaConfig& config, RopeFrequencies& f) {
  if (config.rope_freq_factors.empty()) return;
  if (config.rope_freq_factors.size() != f.inv_freq.size()) {
    throw ConfigError(fmt::format("rope_freqs has {} factors, the RoPE has {} frequency pairs",
                                  config.rope_freq_factors.size(), f.inv_freq.size()));
  }
  for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= config.rope_freq_factors[i];
}

}  // namespace

std::string_view EvalMethodName(EvalMethod method) {
  for (const NamedMethod& m : kMethods) {
    if (m.method == method) return m.name;
  }
  return "unknown";
}

EvalMethod ParseEvalMethod(std::string_view name) {
  for (const NamedMethod& m : kMethods) {
    if (m.name == name) return m.method;
  }
  std::string all;
  for (const NamedMethod& m : kMethods) all += (all.empty() ? "" : ", ") + std::string(m.name);
  throw ConfigError(fmt::format("unknown method '{}' (expected one of {})", name, all));
}

std::vector<EvalMethod> DefaultEvalMethods() {
  return {EvalMethod::kNone, EvalMethod::kLinear, EvalMethod::kNtk,
          EvalMethod::kDynamic, EvalMethod::kDynamicHf, EvalMethod::kYarn};
}

RopeParams MethodRopeParams(EvalMethod method, int64_t ctx, const LlamaConfig& config, const MethodOptions& options) {
  if (ctx < 1) throw ConfigError(fmt::format("ctx must be >= 1, got {}", ctx));
  if (options.factor && !(*options.factor >= 1.0)) {
    throw ConfigError(fmt::format("factor must be >= 1, got {}", *options.factor));
  }
  const int64_t L0 = config.train_ctx;
  const double s =
      options.factor.value_or(std::max(1.0, static_cast<double>(ctx) / static_cast<double>(L0)));
  RopeParams p;
  p.rope_theta = config.rope.rope_theta;
  p.head_dim = config.head_dim;
  p.rotary_dim = config.rope.rotary_dim;
  switch (method) {
    case EvalMethod::kNone: p.rope_type = RopeType::kDefault; break;
    case EvalMethod::kLinear: p.rope_type = RopeType::kLinear; p.factor = s; break;
    case EvalMethod::kNtk: p.rope_type = RopeType::kNtk; p.factor = s; break;
    case EvalMethod::kYarn:
      p.rope_type = RopeType::kYarn;
      p.factor = s;
      p.original_max_position_embeddings = L0;
      p.max_position_embeddings = L0;
      break;
    case EvalMethod::kDynamic:
    case EvalMethod::kDynamicHf:
      p.rope_type = RopeType::kDynamic;
      p.factor = options.factor.value_or(1.0);
      p.max_position_embeddings = L0;
      break;
    case EvalMethod::kLlama3:
      p = UserParams(options.llama3, method, config);
      if (options.factor || !p.factor) p.factor = s;
      break;
    case EvalMethod::kLongrope:
      p = UserParams(options.longrope, method, config);
      if (options.factor || !p.factor) p.factor = s;
      if (p.max_position_embeddings == 0) {
        p.max_position_embeddings = static_cast<int64_t>(static_cast<double>(L0) * *p.factor);
      }
      break;
    case EvalMethod::kNative:
      p = config.rope;
      break;
  }
  return p;
}

void ValidateMethodRope(EvalMethod method, int64_t ctx, const LlamaConfig& config, const MethodOptions& options) {
  const RopeParams p = MethodRopeParams(method, ctx, config, options);
  // The frequencies at the shortest and the longest sequence of a window: every row's frequencies lie
  // between them (dynamic grows monotonically with the length; longrope switches once at L0).
  ComputeRopeFrequencies(p, 1);
  ComputeRopeFrequencies(p, ctx);
}

MethodRope BuildMethodRope(EvalMethod method, int64_t ctx, const LlamaConfig& config,
                           const MethodOptions& options) {
  MethodRope r;
  r.method = method;
  r.ctx = ctx;
  r.params = MethodRopeParams(method, ctx, config, options);
  const RopeParams& p = r.params;
  const std::vector<int64_t> positions = Iota(ctx);
  r.factor = p.factor.value_or(1.0);

  const bool native_dynamic = method == EvalMethod::kNative && p.rope_type == RopeType::kDynamic;
  if (method == EvalMethod::kDynamic || method == EvalMethod::kDynamicHf || native_dynamic) {
    // Frequencies of each row t: dynamic NTK for a sequence of t + 1 tokens.
    std::vector<RopeFrequencies> rows(static_cast<size_t>(ctx));
    for (int64_t t = 0; t < ctx; ++t) {
      rows[static_cast<size_t>(t)] = ComputeRopeFrequencies(p, t + 1);
      if (method == EvalMethod::kNative) ApplyFreqFactors(config, rows[static_cast<size_t>(t)]);
    }
    RopeFrequencies base = ComputeRopeFrequencies(p, 1);
    if (method == EvalMethod::kNative) ApplyFreqFactors(config, base);
    if (method != EvalMethod::kDynamic) {
      // Row t: position t with its own step's frequencies (what a cache of rotated keys holds).
      r.table.half = static_cast<int64_t>(base.inv_freq.size());
      r.table.n_rows = ctx;
      r.table.cos.resize(static_cast<size_t>(ctx * r.table.half));
      r.table.sin.resize(r.table.cos.size());
      for (int64_t t = 0; t < ctx; ++t) {
        const int64_t pos[1] = {t};
        const CosSinTable row = ComputeCosSin(rows[static_cast<size_t>(t)], pos, kPrecision);
        std::copy(row.cos.begin(), row.cos.end(), r.table.cos.begin() + t * r.table.half);
        std::copy(row.sin.begin(), row.sin.end(), r.table.sin.begin() + t * r.table.half);
      }
    } else {
      r.table = ComputeCosSin(base, positions, kPrecision);
      r.pre_rotation = std::make_unique<PreRotationTables>(PreRotationTables::Build(rows, base, kPrecision));
    }
    r.softmax_scale_multiplier = static_cast<float>(base.softmax_scale_multiplier);
    return r;
  }
  const bool at_ctx = method == EvalMethod::kLongrope || p.rope_type == RopeType::kLongrope;
  RopeFrequencies f = at_ctx ? ComputeRopeFrequencies(p, ctx) : ComputeRopeFrequencies(p);
  if (method == EvalMethod::kNative) ApplyFreqFactors(config, f);
  r.table = ComputeCosSin(f, positions, kPrecision);
  r.softmax_scale_multiplier = static_cast<float>(f.softmax_scale_multiplier);
  return r;
}

}  // namespace posenc
