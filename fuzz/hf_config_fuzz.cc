// Fuzz harness: a Hugging Face config.json, read as `posenc inspect --config` reads it (bounded JSON parse,
// ParseHfRopeConfig), then resolved as inspect resolves it (InspectRope: frequencies, regimes, cos/sin) at a
// few sequence lengths and positions, and rendered as inspect --json renders it.
//
// Beyond "no crash, no sanitizer report, no exception other than posenc::Error", the harness checks the
// promise that accepted parameters never give non-finite numbers: every inv_freq, attention_factor,
// softmax-scale multiplier and cos/sin value of an accepted config must be finite, in both precisions.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>
#include <vector>

#include "posenc/core/errors.h"
#include "posenc/rope/hf_config.h"
#include "posenc/io/json_read.h"
#include "posenc/io/rope_json.h"
#include "posenc/rope/inspect.h"

namespace {

void Fail(const char* what, double value) {
  std::fprintf(stderr, "hf_config_fuzz: accepted config gives non-finite %s = %g\n", what, value);
  std::abort();
}

void CheckFinite(const posenc::RopeReport& r) {
  for (float v : r.frequencies.inv_freq) {
    if (!std::isfinite(v) || !(v > 0.0f)) Fail("inv_freq", v);
  }
  if (!std::isfinite(static_cast<float>(r.frequencies.attention_factor))) {
    Fail("attention_factor", r.frequencies.attention_factor);
  }
  if (!std::isfinite(static_cast<float>(r.frequencies.softmax_scale_multiplier))) {
    Fail("softmax_scale_multiplier", r.frequencies.softmax_scale_multiplier);
  }
  for (float v : r.cos_sin.cos) {
    if (!std::isfinite(v)) Fail("cos", v);
  }
  for (float v : r.cos_sin.sin) {
    if (!std::isfinite(v)) Fail("sin", v);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  posenc::HfRopeConfig config;
  try {
    config = posenc::ParseHfRopeConfig(posenc::ParseJsonBounded(text, "fuzz input"));
  } catch (const posenc::Error&) {
    return 0;  // refused with a message: the expected outcome for most inputs
  }
  const posenc::RopeParams& p = config.params;
  const int64_t l0 = p.original_max_position_embeddings.value_or(p.max_position_embeddings);
  const std::vector<std::optional<int64_t>> seq_lens = {std::nullopt, 1, l0 + 1, p.max_position_embeddings + 1};
  const std::vector<int64_t> positions = {0, 1, -7, l0 > 0 ? l0 - 1 : 2, int64_t{1} << 20, int64_t{1} << 40};
  for (const std::optional<int64_t>& seq_len : seq_lens) {
    for (posenc::RopePrecision precision : {posenc::RopePrecision::kExact, posenc::RopePrecision::kHf}) {
      try {
        const posenc::RopeReport report = posenc::InspectRope(p, seq_len, positions, precision);
        CheckFinite(report);
        (void)posenc::RopeReportToJson(report).dump();
      } catch (const posenc::Error&) {
        // e.g. seq_len past what dynamic NTK can represent: refused with a message
      }
    }
  }
  return 0;
}
