// Llama 3.1 frequency scaling (Meta, "The Llama 3 Herd of Models", 2024; HF `_compute_llama3_parameters`):
// wavelengths longer than L0/low_freq_factor are divided by factor, shorter than L0/high_freq_factor kept,
// the band between blended smoothly. float32 operation order as HF.
#include <cmath>
#include <numbers>

#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {

RopeFrequencies ComputeLlama3(const RopeParams& p) {
  RopeFrequencies f = ComputeDefault(p);
  const double L0 = static_cast<double>(*p.original_max_position_embeddings);
  const double low = *p.low_freq_factor, high = *p.high_freq_factor;
  const float low_freq_wavelen = static_cast<float>(L0 / low);    // compared as float32 (tensor vs scalar)
  const float high_freq_wavelen = static_cast<float>(L0 / high);
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  const float factor = static_cast<float>(*p.factor);
  const float L0f = static_cast<float>(L0);
  const float low32 = static_cast<float>(low);
  const float band32 = static_cast<float>(high - low);
  for (float& inv : f.inv_freq) {
    const float wavelen = two_pi / inv;
    const float scaled = wavelen > low_freq_wavelen ? inv / factor : inv;
    const float smooth = (L0f / wavelen - low32) / band32;
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_freq_wavelen) && !(wavelen > low_freq_wavelen);  // both ends medium
    inv = medium ? smoothed : scaled;
  }
  return f;
}

}  // namespace posenc::scaling
