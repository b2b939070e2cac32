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
  RopeMethod method;
  std::string_view name;
};
constexpr NamedMethod kMethods[] = {
    {RopeMethod::kNone, "none"},         {RopeMethod::kLinear, "linear"},  {RopeMethod::kNtk, "ntk"},
    {RopeMethod::kYarn, "yarn"},         {RopeMethod::kDynamic, "dynamic"}, {RopeMethod::kDynamicHf, "dynamic-hf"},
    {RopeMethod::kLlama3, "llama3"},     {RopeMethod::kLongrope, "longrope"}, {RopeMethod::kNative, "native"},
    {RopeMethod::kSelfExtend, "self-extend"}, {RopeMethod::kDualChunk, "dca"}, {RopeMethod::kReRope, "rerope"},
    {RopeMethod::kLeakyReRope, "leaky-rerope"}, {RopeMethod::kSinks, "sinks"},
    {RopeMethod::kLmInfinite, "lm-infinite"},
};

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), int64_t{0});
  return v;
}

RopeParams UserParams(const std::optional<RopeParams>& p, RopeMethod method, const ModelConfig& config,
                      const RopeParams& layer) {
  if (!p) {
    throw ConfigError(fmt::format("method '{}' needs its parameters: an HF-style config with rope_type {}, or "
                                  "the {} parameters", RopeMethodName(method), RopeMethodName(method),
                                  RopeMethodName(method)));
  }
  RopeParams params = *p;
  if (params.head_dim == 0) params.head_dim = config.head_dim;
  if (params.head_dim != config.head_dim) {
    throw ConfigError(fmt::format("method '{}': head_dim must equal the model's ({}), got {}",
                                  RopeMethodName(method), config.head_dim, params.head_dim));
  }
  if (params.rotary_dim == 0) params.rotary_dim = layer.rotary_dim;
  if (!params.original_max_position_embeddings) params.original_max_position_embeddings = config.train_ctx;
  return params;
}

// llama.cpp's rope_freqs.weight (Llama 3.1 GGUF files): pair i turns with inv_freq[i] / factor[i]
// (ggml_rope_ext's freq_factors), in float32 as ggml divides.
void ApplyFreqFactors(const LayerSpec& layer, RopeFrequencies& f) {
  if (layer.rope_freq_factors.empty()) return;
  if (layer.rope_freq_factors.size() != f.inv_freq.size()) {
    throw ConfigError(fmt::format("rope_freqs has {} factors, the RoPE has {} frequency pairs",
                                  layer.rope_freq_factors.size(), f.inv_freq.size()));
  }
  for (size_t i = 0; i < f.inv_freq.size(); ++i) f.inv_freq[i] /= layer.rope_freq_factors[i];
}

bool HasSlidingAndFull(const ModelConfig& c) {
  bool sliding = false, full = false;
  for (const LayerSpec& l : c.layers) {
    if (!l.rope) continue;
    (l.sliding() ? sliding : full) = true;
  }
  return sliding && full;
}

// The layers a method changes: every RoPE layer except the sliding ones of a model mixing sliding and full ones.
bool Changed(const ModelConfig& c, const LayerSpec& l) { return !(l.sliding() && HasSlidingAndFull(c)); }

// Does `method` scale this layer (else the layer keeps the file's own RoPE)?
bool Scaled(RopeMethod method, const ModelConfig& c, const LayerSpec& l) {
  return method != RopeMethod::kNative && !IsPositionMap(method) && Changed(c, l);
}

// Does `method` attend through its position map on this layer?
bool Mapped(RopeMethod method, const ModelConfig& c, const LayerSpec& l) {
  return IsPositionMap(method) && l.rope && Changed(c, l);
}

bool SameParams(const RopeParams& a, const RopeParams& b) {
  return a.rope_type == b.rope_type && a.rope_theta == b.rope_theta && a.head_dim == b.head_dim &&
         a.RotaryDim() == b.RotaryDim() && a.max_position_embeddings == b.max_position_embeddings &&
         a.factor == b.factor && a.original_max_position_embeddings == b.original_max_position_embeddings &&
         a.attention_factor == b.attention_factor && a.beta_fast == b.beta_fast && a.beta_slow == b.beta_slow &&
         a.mscale == b.mscale && a.mscale_all_dim == b.mscale_all_dim && a.truncate == b.truncate &&
         a.low_freq_factor == b.low_freq_factor && a.high_freq_factor == b.high_freq_factor &&
         a.short_factor == b.short_factor && a.long_factor == b.long_factor;
}

// What one table is built from.
struct TableSpec {
  RopeParams params;
  bool native = false;                  // the file's own RoPE (freq factors and magnitude apply)
  std::vector<float> freq_factors;      // native only
  double magnitude = 1.0;               // native only
  RopeMethod rows = RopeMethod::kNone;  // kDynamic: pre-rotation rows; kDynamicHf: per-row frequencies; else static

  bool operator==(const TableSpec& o) const {
    return SameParams(params, o.params) && native == o.native && freq_factors == o.freq_factors &&
           magnitude == o.magnitude && rows == o.rows;
  }
};

TableSpec SpecOf(RopeMethod method, int64_t ctx, const ModelConfig& c, const LayerSpec& l, const MethodOptions& o) {
  TableSpec t;
  if (Scaled(method, c, l)) {
    t.params = MethodRopeParams(method, ctx, c, l.rope_params, o);
    if (method == RopeMethod::kDynamic || method == RopeMethod::kDynamicHf) t.rows = method;
  } else {
    t.params = l.rope_params;
    t.native = true;
    t.freq_factors = l.rope_freq_factors;
    t.magnitude = l.rope_magnitude;
    if (t.params.rope_type == RopeType::kDynamic) t.rows = RopeMethod::kDynamicHf;
  }
  return t;
}

RopeFrequencies Frequencies(const TableSpec& t, std::optional<int64_t> seq_len, const LayerSpec* layer) {
  RopeFrequencies f = ComputeRopeFrequencies(t.params, seq_len);
  if (t.native && layer != nullptr) ApplyFreqFactors(*layer, f);
  return f;
}

void Scale(CosSinTable& table, double magnitude) {
  if (magnitude == 1.0) return;
  const float m = static_cast<float>(magnitude);
  for (float& v : table.cos) v *= m;
  for (float& v : table.sin) v *= m;
}

// The table (and pre-rotation rows) of one spec over positions [0, n_rows).
void BuildTable(const TableSpec& t, const LayerSpec& layer, int64_t ctx, int64_t n_rows, MethodRope& r) {
  const std::vector<int64_t> positions = Iota(n_rows);
  CosSinTable table;
  std::unique_ptr<PreRotationTables> pre;
  float multiplier = 1.0f;
  if (t.rows != RopeMethod::kNone) {
    // Frequencies of each row p: dynamic NTK for a sequence of p + 1 tokens.
    std::vector<RopeFrequencies> rows(static_cast<size_t>(n_rows));
    for (int64_t p = 0; p < n_rows; ++p) rows[static_cast<size_t>(p)] = Frequencies(t, p + 1, &layer);
    const RopeFrequencies base = Frequencies(t, 1, &layer);
    if (t.rows == RopeMethod::kDynamicHf) {
      // Row p: position p with its own step's frequencies (what a cache of rotated keys holds).
      table.half = static_cast<int64_t>(base.inv_freq.size());
      table.n_rows = n_rows;
      table.cos.resize(static_cast<size_t>(n_rows * table.half));
      table.sin.resize(table.cos.size());
      for (int64_t p = 0; p < n_rows; ++p) {
        const int64_t pos[1] = {p};
        const CosSinTable row = ComputeCosSin(rows[static_cast<size_t>(p)], pos, kPrecision);
        std::copy(row.cos.begin(), row.cos.end(), table.cos.begin() + p * table.half);
        std::copy(row.sin.begin(), row.sin.end(), table.sin.begin() + p * table.half);
      }
    } else {
      table = ComputeCosSin(base, positions, kPrecision);
      pre = std::make_unique<PreRotationTables>(PreRotationTables::Build(rows, base, kPrecision));
    }
    multiplier = static_cast<float>(base.softmax_scale_multiplier);
    r.frequencies.push_back(base);
  } else {
    const bool at_ctx = t.params.rope_type == RopeType::kLongrope;
    const RopeFrequencies f = at_ctx ? Frequencies(t, ctx, &layer) : Frequencies(t, std::nullopt, &layer);
    table = ComputeCosSin(f, positions, kPrecision);
    multiplier = static_cast<float>(f.softmax_scale_multiplier);
    r.frequencies.push_back(f);
  }
  r.magnitudes.push_back(t.magnitude);
  Scale(table, t.magnitude);
  r.tables.push_back(std::move(table));
  r.pre_rotations.push_back(std::move(pre));
  r.multipliers.push_back(multiplier);
}

// The method's meaning for the model's absolute positions (or its lack of any position encoding).
double AbsoluteScale(RopeMethod method, int64_t ctx, const ModelConfig& c, const MethodOptions& o) {
  const bool any_rope = PrimaryRopeLayer(c) != nullptr;
  const bool plain = method == RopeMethod::kNone || method == RopeMethod::kNative;
  if (c.absolute_positions == AbsolutePositions::kLearned) {
    double scale = 1.0;
    if (method == RopeMethod::kLinear) {
      scale = o.factor.value_or(std::max(1.0, static_cast<double>(ctx) / static_cast<double>(c.train_ctx)));
    } else if (!plain && !any_rope) {
      throw ConfigError(fmt::format("method '{}' scales RoPE, which this model does not have: its positions are a "
                                    "learned table of {} rows (none and native read it; linear interpolates it)",
                                    RopeMethodName(method), c.n_positions));
    }
    if (static_cast<double>(ctx - 1) / scale >= static_cast<double>(c.n_positions)) {
      throw ConfigError(fmt::format("ctx {} with method '{}' reads positions past the learned position table of "
                                    "n_positions = {} rows: learned absolute positions cannot extrapolate (the method "
                                    "linear interpolates the table)", ctx, RopeMethodName(method), c.n_positions));
    }
    return scale;
  }
  if (!plain && !any_rope) {
    throw ConfigError(fmt::format("method '{}' scales RoPE, which this model does not have ({}): only none and "
                                  "native apply", RopeMethodName(method),
                                  c.absolute_positions == AbsolutePositions::kSinusoidal ? "sinusoidal positions"
                                                                                         : "no positional encoding"));
  }
  return 1.0;
}

// The user's position-map parameters, dca's unset ones from the file's dual_chunk_attention_config.
PositionMapOptions MapOptions(const ModelConfig& c, const MethodOptions& o) {
  PositionMapOptions m = o.position_map;
  if (c.dual_chunk) {
    if (!m.chunk_size) m.chunk_size = c.dual_chunk->chunk_size;
    if (!m.local_size) m.local_size = c.dual_chunk->local_size;
  }
  return m;
}

// A position map needs RoPE layers to map, each with a static native RoPE (one set of frequencies for every
// position: the map rotates q and k itself), and parameters in range.
void ValidatePositionMap(RopeMethod method, int64_t ctx, const ModelConfig& c, const MethodOptions& o) {
  bool any = false;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerSpec& l = c.layers[i];
    if (!Mapped(method, c, l)) continue;
    any = true;
    if (l.rope_params.rope_type == RopeType::kDynamic) {
      throw ConfigError(fmt::format("method '{}' maps positions over a static RoPE; layer {} has dynamic NTK "
                                    "scaling (its frequencies change with the sequence length)",
                                    RopeMethodName(method), i));
    }
  }
  if (!any) {
    throw ConfigError(fmt::format("method '{}' maps RoPE positions, and this model has no RoPE layer it changes",
                                  RopeMethodName(method)));
  }
  MakePositionMap(std::string(RopeMethodName(method)), MapOptions(c, o), ctx, c.train_ctx);
}

}  // namespace

std::string_view RopeMethodName(RopeMethod method) {
  for (const NamedMethod& m : kMethods) {
    if (m.method == method) return m.name;
  }
  return "unknown";
}

RopeMethod ParseRopeMethod(std::string_view name) {
  for (const NamedMethod& m : kMethods) {
    if (m.name == name) return m.method;
  }
  std::string all;
  for (const NamedMethod& m : kMethods) all += (all.empty() ? "" : ", ") + std::string(m.name);
  throw ConfigError(fmt::format("unknown method '{}' (expected one of {})", name, all));
}

bool IsPositionMap(RopeMethod method) {
  return method == RopeMethod::kSelfExtend || method == RopeMethod::kDualChunk || method == RopeMethod::kReRope ||
         method == RopeMethod::kLeakyReRope || method == RopeMethod::kSinks || method == RopeMethod::kLmInfinite;
}

std::vector<RopeMethod> DefaultRopeMethods() {
  return {RopeMethod::kNone, RopeMethod::kLinear, RopeMethod::kNtk,
          RopeMethod::kDynamic, RopeMethod::kDynamicHf, RopeMethod::kYarn};
}

RopeParams MethodRopeParams(RopeMethod method, int64_t ctx, const ModelConfig& config, const RopeParams& layer,
                            const MethodOptions& options) {
  if (ctx < 1) throw ConfigError(fmt::format("ctx must be >= 1, got {}", ctx));
  if (options.factor && !(*options.factor >= 1.0)) {
    throw ConfigError(fmt::format("factor must be >= 1, got {}", *options.factor));
  }
  const int64_t L0 = config.train_ctx;
  const double s =
      options.factor.value_or(std::max(1.0, static_cast<double>(ctx) / static_cast<double>(L0)));
  RopeParams p;
  p.rope_theta = layer.rope_theta;
  p.head_dim = config.head_dim;
  p.rotary_dim = layer.rotary_dim;
  switch (method) {
    case RopeMethod::kNone: p.rope_type = RopeType::kDefault; break;
    case RopeMethod::kLinear: p.rope_type = RopeType::kLinear; p.factor = s; break;
    case RopeMethod::kNtk: p.rope_type = RopeType::kNtk; p.factor = s; break;
    case RopeMethod::kYarn:
      p.rope_type = RopeType::kYarn;
      p.factor = s;
      p.original_max_position_embeddings = L0;
      p.max_position_embeddings = L0;
      p.beta_fast = options.yarn.beta_fast;
      p.beta_slow = options.yarn.beta_slow;
      p.mscale = options.yarn.mscale;
      p.mscale_all_dim = options.yarn.mscale_all_dim;
      p.attention_factor = options.yarn.attention_factor;
      p.truncate = !options.yarn.no_truncate;
      break;
    case RopeMethod::kDynamic:
    case RopeMethod::kDynamicHf:
      p.rope_type = RopeType::kDynamic;
      p.factor = options.factor.value_or(1.0);
      p.max_position_embeddings = L0;
      break;
    case RopeMethod::kLlama3:
      p = UserParams(options.llama3, method, config, layer);
      if (options.factor || !p.factor) p.factor = s;
      break;
    case RopeMethod::kLongrope:
      p = UserParams(options.longrope, method, config, layer);
      if (options.factor || !p.factor) p.factor = s;
      if (p.max_position_embeddings == 0) {
        p.max_position_embeddings = static_cast<int64_t>(static_cast<double>(L0) * *p.factor);
      }
      break;
    case RopeMethod::kNative:
    case RopeMethod::kSelfExtend:
    case RopeMethod::kDualChunk:
    case RopeMethod::kReRope:
    case RopeMethod::kLeakyReRope:
    case RopeMethod::kSinks:
    case RopeMethod::kLmInfinite:
      p = layer;
      break;
  }
  return p;
}

void ValidateMethodRope(RopeMethod method, int64_t ctx, const ModelConfig& config, const MethodOptions& options) {
  if (ctx < 1) throw ConfigError(fmt::format("ctx must be >= 1, got {}", ctx));
  AbsoluteScale(method, ctx, config, options);
  std::vector<TableSpec> seen;
  for (const LayerSpec& l : config.layers) {
    if (!l.rope) continue;
    const TableSpec t = SpecOf(method, ctx, config, l, options);
    if (std::find(seen.begin(), seen.end(), t) != seen.end()) continue;
    // The frequencies at the shortest and the longest sequence of a window: every row's frequencies lie
    // between them (dynamic grows monotonically with the length; longrope switches once at L0).
    Frequencies(t, 1, &l);
    Frequencies(t, ctx, &l);
    seen.push_back(t);
  }
  if (IsPositionMap(method)) ValidatePositionMap(method, ctx, config, options);
}

MethodRope BuildMethodRope(RopeMethod method, int64_t ctx, const ModelConfig& config, const MethodOptions& options,
                           int64_t n_rows) {
  if (n_rows == 0) n_rows = ctx;
  if (n_rows < 1) throw ConfigError(fmt::format("the RoPE tables need >= 1 rows, got {}", n_rows));
  MethodRope r;
  r.method = method;
  r.ctx = ctx;
  r.absolute_scale = AbsoluteScale(method, ctx, config, options);
  r.factor = method == RopeMethod::kLinear && PrimaryRopeLayer(config) == nullptr ? r.absolute_scale : 1.0;
  std::vector<TableSpec> specs;
  for (const LayerSpec& l : config.layers) {
    if (!l.rope) {
      r.layer_table.push_back(-1);
      continue;
    }
    const TableSpec t = SpecOf(method, ctx, config, l, options);
    auto it = std::find(specs.begin(), specs.end(), t);
    if (it == specs.end()) {
      BuildTable(t, l, ctx, n_rows, r);
      specs.push_back(t);
      it = specs.end() - 1;
    }
    r.layer_table.push_back(static_cast<int>(it - specs.begin()));
  }
  if (IsPositionMap(method)) {
    ValidatePositionMap(method, ctx, config, options);
    r.position_map = MakePositionMap(std::string(RopeMethodName(method)), MapOptions(config, options), ctx,
                                     config.train_ctx);
    for (const LayerSpec& l : config.layers) r.layer_mapped.push_back(Mapped(method, config, l));
  }
  if (const LayerSpec* primary = PrimaryRopeLayer(config)) {
    const TableSpec t = SpecOf(method, ctx, config, *primary, options);
    r.params = t.params;
    r.factor = t.params.factor.value_or(1.0);
  }
  return r;
}

MethodRope BuildDynamicStepRope(int64_t seq_len, const ModelConfig& config, const MethodOptions& options) {
  MethodRope r = BuildMethodRope(RopeMethod::kNone, seq_len, config, options);  // the unscaled layers' tables
  std::vector<std::pair<TableSpec, int>> built;  // spec -> index in r.tables
  for (size_t i = 0; i < config.layers.size(); ++i) {
    const LayerSpec& l = config.layers[i];
    if (!l.rope || !Scaled(RopeMethod::kDynamic, config, l)) continue;
    TableSpec t;
    t.params = MethodRopeParams(RopeMethod::kDynamic, seq_len, config, l.rope_params, options);
    auto it = std::find_if(built.begin(), built.end(), [&](const auto& b) { return b.first == t; });
    int index;
    if (it != built.end()) {
      index = it->second;
    } else {
      const RopeFrequencies f = ComputeRopeFrequencies(t.params, seq_len);
      r.tables.push_back(ComputeCosSin(f, Iota(seq_len), kPrecision));
      r.frequencies.push_back(f);
      r.magnitudes.push_back(1.0);
      r.pre_rotations.push_back(nullptr);
      r.multipliers.push_back(static_cast<float>(f.softmax_scale_multiplier));
      index = static_cast<int>(r.tables.size()) - 1;
      built.emplace_back(t, index);
    }
    r.layer_table[i] = index;
  }
  r.method = RopeMethod::kDynamic;
  return r;
}

ForwardRope MethodRope::forward() const {
  ForwardRope f;
  f.absolute_scale = absolute_scale;
  for (int t : layer_table) {
    LayerRope l;
    if (t >= 0) {
      l.table = View(tables[static_cast<size_t>(t)]);
      l.pre_rotation = pre_rotations[static_cast<size_t>(t)].get();
      l.softmax_scale_multiplier = multipliers[static_cast<size_t>(t)];
      if (position_map && layer_mapped[f.layers.size()]) {
        const RopeFrequencies& fr = frequencies[static_cast<size_t>(t)];
        l.position_map = position_map.get();
        l.inv_freq = fr.inv_freq.data();
        l.magnitude = fr.attention_factor * magnitudes[static_cast<size_t>(t)];
      }
    }
    f.layers.push_back(l);
  }
  return f;
}

int MethodRope::UniformTable() const {
  int found = -1;
  for (int t : layer_table) {
    if (t < 0) continue;
    if (found >= 0 && t != found) {
      throw ConfigError("the model's layers use different RoPE tables; this path needs one table for every layer");
    }
    found = t;
  }
  if (found < 0) throw ConfigError("the model has no layer with RoPE");
  return found;
}

}  // namespace posenc
