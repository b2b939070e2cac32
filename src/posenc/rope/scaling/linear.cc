// linear scaling = position interpolation (Chen et al. 2023, "Extending Context Window ... via Positional
// Interpolation", Sec. 2.2): positions / factor, done as inv_freq / factor.
#include "posenc/rope/scaling/scaling.h"

namespace posenc::scaling {

RopeFrequencies ComputeLinear(const RopeParams& p) {
  RopeFrequencies f = ComputeDefault(p);
  const float factor = static_cast<float>(*p.factor);  // HF: inv_freq /= factor (float32 tensor op)
  for (float& v : f.inv_freq) v = v / factor;
  return f;
}

}  // namespace posenc::scaling
