// Scalar reference RoPE kernel (RopeKernelScalar): the definition of correct every fast path is tested
// against. Plain C++, one element at a time, float32 math with separately rounded products.
#include <vector>

#include "posenc/kernels/rope_kernels.h"
#include "posenc/kernels/sincos.h"

namespace posenc::kernels {
namespace {

// Element access for the three storage types (float32 math in every case).
template <typename T>
struct Elem;
template <>
struct Elem<float> {
  static float Load(const float* p) { return *p; }
  static void Store(float* p, float v) { *p = v; }
};
struct Bf16Tag {};
struct F16Tag {};
template <>
struct Elem<Bf16Tag> {
  static float Load(const uint16_t* p) { return BF16ToF32(*p); }
  static void Store(uint16_t* p, float v) { *p = F32ToBF16(v); }
};
template <>
struct Elem<F16Tag> {
  static float Load(const uint16_t* p) { return F16ToF32(*p); }
  static void Store(uint16_t* p, float v) { *p = F32ToF16(v); }
};

// Rotates pair (a, b) by (c, s) in the requested direction.
inline void RotatePair(float& a, float& b, float c, float s, RopeDirection direction) {
  const float x = a, y = b;
  switch (direction) {
    case RopeDirection::kForward:
      a = x * c - y * s;
      b = x * s + y * c;
      break;
    case RopeDirection::kBackward:
      a = x * c + y * s;
      b = y * c - x * s;
      break;
    case RopeDirection::kInverse: {
      const float inv_norm = 1.0f / (c * c + s * s);
      a = (x * c + y * s) * inv_norm;
      b = (y * c - x * s) * inv_norm;
      break;
    }
  }
}

template <typename Tag, typename Storage>
void RotateAll(const RopeKernelArgs& k) {
  Storage* base = static_cast<Storage*>(k.data);
  const int64_t half = k.half;
  // Pair i is channels (i0, i1): (2i, 2i+1) interleaved, (i, i + half) half-split.
  const int64_t step = k.layout == RopeLayout::kInterleaved ? 2 : 1;
  const int64_t partner = k.layout == RopeLayout::kInterleaved ? 1 : half;
  std::vector<float> cos_fly, sin_fly;  // on the fly: this token's coefficients
  if (k.inv_freq != nullptr) cos_fly.resize(static_cast<size_t>(half)), sin_fly.resize(static_cast<size_t>(half));
  for (int64_t t = 0; t < k.n_tokens; ++t) {
    const float* cos_row = cos_fly.data();
    const float* sin_row = sin_fly.data();
    if (k.inv_freq != nullptr) {
      SinCosRowScalar(k.inv_freq, half, k.rows[t], k.attention_factor, k.precision, cos_fly.data(),
                      sin_fly.data());
    } else {
      cos_row = k.cos + k.rows[t] * half;
      sin_row = k.sin + k.rows[t] * half;
    }
    for (int64_t h = 0; h < k.n_heads; ++h) {
      Storage* x = base + t * k.token_stride + h * k.head_stride;
      for (int64_t i = 0; i < half; ++i) {
        Storage* pa = x + i * step;
        Storage* pb = pa + partner;
        float a = Elem<Tag>::Load(pa), b = Elem<Tag>::Load(pb);
        RotatePair(a, b, cos_row[i], sin_row[i], k.direction);
        Elem<Tag>::Store(pa, a);
        Elem<Tag>::Store(pb, b);
      }
    }
  }
}

}  // namespace

void RopeKernelScalar(const RopeKernelArgs& args) {
  switch (args.dtype) {
    case DType::kF32: RotateAll<float, float>(args); break;
    case DType::kBF16: RotateAll<Bf16Tag, uint16_t>(args); break;
    case DType::kF16: RotateAll<F16Tag, uint16_t>(args); break;
  }
}

}  // namespace posenc::kernels
