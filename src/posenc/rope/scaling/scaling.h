// One pure function per rope type: RopeParams (validated) -> RopeFrequencies. Internal to posenc; the public
// entry point is ComputeRopeFrequencies (rope/frequencies.h). Each follows the float32 operation order of the
// matching Hugging Face transformers function so inv_freq agrees with HF's float32 run within 1 ulp.
#pragma once

#include <cstdint>
#include <optional>

#include "posenc/rope/frequencies.h"

namespace posenc::scaling {

/// fl32(1 / fl32(fl32(base) ^ fl32(fl32(2i) / dim))) for i < dim/2. HF `_compute_default_rope_parameters`.
std::vector<float> BaseInvFreq(double base, int64_t dim);

/// get_mscale(s, m) = 1 if s <= 1 else 0.1 * m * ln(s) + 1 (YaRN paper Sec. 3.4; HF `get_mscale`).
double GetMscale(double scale, double mscale = 1.0);

RopeFrequencies ComputeDefault(const RopeParams& p);                               // default.cc
RopeFrequencies ComputeLinear(const RopeParams& p);                                // linear.cc
RopeFrequencies ComputeNtk(const RopeParams& p);                                   // ntk.cc
RopeFrequencies ComputeDynamic(const RopeParams& p, std::optional<int64_t> seq_len);  // dynamic.cc
RopeFrequencies ComputeYarn(const RopeParams& p);                                  // yarn.cc
RopeFrequencies ComputeLlama3(const RopeParams& p);                                // llama3.cc
RopeFrequencies ComputeLongrope(const RopeParams& p, std::optional<int64_t> seq_len);  // longrope.cc

/// yarn/longrope factor: the explicit one, else max_position_embeddings / original_max_position_embeddings.
double FactorOrRatio(const RopeParams& p);

}  // namespace posenc::scaling
