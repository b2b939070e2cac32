// One file per rope type, each defining its row of the rope-type table (rope/rope_types.h): validate, compute,
// message inputs and pair regimes. Internal to posenc; the public entry points are ValidateRopeParams
// (rope/params.h), ComputeRopeFrequencies and PairRegimes (rope/frequencies.h). Each compute follows the float32
// operation order of the matching Hugging Face transformers function so inv_freq agrees with HF's float32 run
// within 1 ulp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "posenc/rope/frequencies.h"
#include "posenc/rope/rope_types.h"

namespace posenc::scaling {

const RopeTypeRow& DefaultRow();   // default.cc
const RopeTypeRow& LinearRow();    // linear.cc
const RopeTypeRow& NtkRow();       // ntk.cc
const RopeTypeRow& DynamicRow();   // dynamic.cc
const RopeTypeRow& YarnRow();      // yarn.cc
const RopeTypeRow& Llama3Row();    // llama3.cc
const RopeTypeRow& LongropeRow();  // longrope.cc

/// fl32(1 / fl32(fl32(base) ^ fl32(fl32(2i) / dim))) for i < dim/2. HF `_compute_default_rope_parameters`.
std::vector<float> BaseInvFreq(double base, int64_t dim);

/// get_mscale(s, m) = 1 if s <= 1 else 0.1 * m * ln(s) + 1 (YaRN paper Sec. 3.4; HF `get_mscale`).
double GetMscale(double scale, double mscale = 1.0);

/// yarn/longrope factor: the explicit one, else max_position_embeddings / original_max_position_embeddings.
double FactorOrRatio(const RopeParams& p);

/// Row pieces shared by several types (default.cc): no checks, no extra message inputs, every pair kKept.
void NoChecks(const RopeParams& p);
std::string NoInputs(const RopeParams& p, size_t i, std::optional<int64_t> seq_len);
std::vector<PairRegime> AllKept(const RopeParams& p);

// Checks shared by the rows' validate functions (checks.cc). Errors: ConfigError naming the field and value.

/// `field` must be finite and > 0.
void RequireFinitePositive(const char* field, double value);
/// `value`, when given, must be finite and >= 0.
void RequireOptionalNonNegative(const char* field, const std::optional<double>& value);
/// factor: required (or, for yarn / longrope, implied by max_position_embeddings / original_max_position_embeddings)
/// and finite in float32 and >= 1.
void RequireFactor(const RopeParams& p, bool required);
/// original_max_position_embeddings given and >= 1.
void RequireOriginal(const RopeParams& p);
/// yarn / longrope: RequireOriginal, a factor given or implied by max_position_embeddings (then >= 1), and
/// attention_factor >= 0 when given.
void RequireLengthsAndFactor(const RopeParams& p);
/// A longrope factor list of `half` entries, each > 0 and finite and non-zero in float32.
void RequireFactorList(const char* field, const std::vector<double>& list, int64_t half);

}  // namespace posenc::scaling
