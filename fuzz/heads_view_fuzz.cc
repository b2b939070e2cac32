// libFuzzer harness: the shape and stride checks of every rotation entry point (C++, C API, Python binding) over
// fuzzed views. Bytes -> two views [n_tokens, n_heads, head_dim] with strides and a table half; each field is a
// small number or a raw 64-bit one (strides near INT64_MAX). Properties, any violation traps:
//   * CheckHeadsView accepting a view means its byte extent fits in 64-bit offsets (recomputed here in 128 bits);
//   * a view whose extent fits a 64 KiB buffer is rotated through posenc_apply_rope_table inside the buffer
//     (AddressSanitizer catches a byte outside it), a refused one gets a non-OK status and touches nothing;
//   * RowsShareMemory of the two views agrees with marking their bytes one by one.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "posenc/c_api.h"
#include "posenc/core/errors.h"
#include "posenc/core/strided_rows.h"
#include "posenc/rope/apply.h"

namespace {

constexpr int64_t kBufferBytes = 64 << 10;
constexpr __int128 kMaxRowsChecked = int64_t{1} << 20;  // the overlap sort's memory grows with the rows

struct Reader {
  const uint8_t* data;
  size_t size;
  int64_t Next() {
    uint8_t mode = Byte();
    if ((mode & 3) != 0) return static_cast<int8_t>(Byte());  // mostly small values, any sign
    int64_t v = 0;
    for (int i = 0; i < 8; ++i) v = (v << 8) | Byte();
    return v;
  }
  uint8_t Byte() {
    if (size == 0) return 0;
    --size;
    return *data++;
  }
};

struct Extent {
  bool fits = false;
  __int128 lo = 0, hi = 0;  // bytes from data
};

Extent ExtentOf(const posenc::HeadsView& v) {
  Extent e;
  const __int128 es = posenc::DTypeSize(v.dtype);
  e.hi = __int128{v.head_dim} * es;
  bool overflow = false;
  constexpr __int128 kFar = __int128{1} << 100;
  for (const auto& [n, s] : {std::pair{v.n_tokens, v.token_stride}, std::pair{v.n_heads, v.head_stride}}) {
    // (n - 1) * s fits 127 bits (both factors are 64-bit); the element size can take it past __int128.
    __int128 reach = 0;
    if (__builtin_mul_overflow((__int128{n} - 1) * s, es, &reach) || reach > kFar || reach < -kFar) {
      // far past 64 bits (or past 128): not addressable, and the sums below stay in range
      overflow = true;
      continue;
    }
    (reach < 0 ? e.lo : e.hi) += reach;
  }
  e.fits = !overflow && e.lo >= std::numeric_limits<int64_t>::min() && e.hi <= std::numeric_limits<int64_t>::max();
  return e;
}

posenc::HeadsView ReadView(Reader& r) {
  posenc::HeadsView v;
  const uint8_t d = r.Byte() % 3;
  v.dtype = d == 0 ? posenc::DType::kF32 : d == 1 ? posenc::DType::kBF16 : posenc::DType::kF16;
  v.n_tokens = r.Next();
  v.n_heads = r.Next();
  v.head_dim = r.Next();
  v.token_stride = r.Next();
  v.head_stride = r.Next();
  return v;
}

bool Small(const posenc::HeadsView& v) {
  return v.n_tokens >= 0 && v.n_heads >= 0 && __int128{v.n_tokens} * v.n_heads <= kMaxRowsChecked;
}

// Rotates v (placed in buf so its extent starts at buf[0]) through the C API; the status must match `accepted`.
void RunThroughCApi(const posenc::HeadsView& v, const Extent& e, bool accepted, std::vector<uint8_t>& buf,
                    int64_t half) {
  posenc_heads_view c{};
  c.dtype = v.dtype == posenc::DType::kF32 ? POSENC_DTYPE_F32
            : v.dtype == posenc::DType::kBF16 ? POSENC_DTYPE_BF16
                                               : POSENC_DTYPE_F16;
  c.n_tokens = v.n_tokens;
  c.n_heads = v.n_heads;
  c.head_dim = v.head_dim;
  c.token_stride = v.token_stride;
  c.head_stride = v.head_stride;
  // A negative head_dim or an empty view has no meaningful extent; such a view is only ever refused.
  const bool in_buffer = e.fits && v.head_dim >= 0 && e.lo > -kBufferBytes && e.hi - e.lo <= kBufferBytes;
  c.data = in_buffer ? buf.data() - static_cast<int64_t>(e.lo) : buf.data();
  if (accepted && !in_buffer) return;  // a valid view larger than this buffer: the caller owns more memory
  const int64_t n = v.n_tokens > 0 && v.n_tokens <= (1 << 16) ? v.n_tokens : 0;
  if (n != v.n_tokens) return;
  if (half < 1 || half > 4096) return;  // the table the C API reads holds `half` floats per row
  const int64_t h = half;
  std::vector<float> cos(static_cast<size_t>(h), 0.6f), sin(static_cast<size_t>(h), 0.8f);
  std::vector<int64_t> rows(static_cast<size_t>(n), 0);
  const posenc_status s = posenc_apply_rope_table(&c, rows.data(), rows.size(), cos.data(), sin.data(), 1, h,
                                                  POSENC_LAYOUT_HALF_SPLIT, POSENC_FORWARD);
  if (accepted != (s == POSENC_OK)) __builtin_trap();  // the C API checks exactly as CheckHeadsView
}

// Byte-by-byte overlap of two views placed at their offsets in one buffer.
bool MarkedOverlap(const posenc::HeadsView& a, const posenc::HeadsView& b, int64_t origin_a, int64_t origin_b) {
  std::vector<uint8_t> mark(static_cast<size_t>(4 * kBufferBytes), 0);
  bool shared = false;
  auto visit = [&](const posenc::HeadsView& v, int64_t origin, uint8_t bit) {
    const int64_t es = posenc::DTypeSize(v.dtype);
    for (int64_t t = 0; t < v.n_tokens; ++t) {
      for (int64_t h = 0; h < v.n_heads; ++h) {
        for (int64_t c = 0; c < v.head_dim * es; ++c) {
          const int64_t at = origin + (t * v.token_stride + h * v.head_stride) * es + c;
          if ((mark[static_cast<size_t>(at)] & ~bit) != 0) shared = true;
          mark[static_cast<size_t>(at)] |= bit;
        }
      }
    }
  };
  visit(a, origin_a, 1);
  visit(b, origin_b, 2);
  return shared;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader r{data, size};
  const int64_t half = r.Next();
  posenc::HeadsView a = ReadView(r);
  posenc::HeadsView b = ReadView(r);
  const int64_t shift = r.Next();  // b's start relative to a's, in bytes
  std::vector<uint8_t> buf(static_cast<size_t>(kBufferBytes), 0);
  bool accepted[2] = {false, false};
  posenc::HeadsView* views[2] = {&a, &b};
  for (int i = 0; i < 2; ++i) {
    posenc::HeadsView& v = *views[i];
    if (!Small(v)) continue;
    v.data = buf.data();  // never dereferenced by the check
    try {
      posenc::CheckHeadsView("x", v, half);
      accepted[i] = true;
    } catch (const posenc::ShapeError&) {
    }
    const Extent e = ExtentOf(v);
    if (accepted[i] && v.n_tokens > 0 && v.n_heads > 0 && !e.fits) __builtin_trap();  // accepted, not addressable
    RunThroughCApi(v, e, accepted[i], buf, half);
  }
  // Overlap of two accepted views that fit the marking buffer side by side.
  if (accepted[0] && accepted[1] && a.n_tokens > 0 && a.n_heads > 0 && b.n_tokens > 0 && b.n_heads > 0) {
    const Extent ea = ExtentOf(a), eb = ExtentOf(b);
    const __int128 s = shift % kBufferBytes;
    if (ea.hi - ea.lo <= kBufferBytes && eb.hi - eb.lo <= kBufferBytes) {
      const int64_t origin_a = kBufferBytes - static_cast<int64_t>(ea.lo);
      const int64_t origin_b = kBufferBytes + static_cast<int64_t>(s) - static_cast<int64_t>(eb.lo);
      if (origin_b + eb.lo >= 0 && origin_b + eb.hi <= 4 * kBufferBytes) {
        std::vector<uint8_t> space(static_cast<size_t>(4 * kBufferBytes));
        const int64_t es_a = posenc::DTypeSize(a.dtype), es_b = posenc::DTypeSize(b.dtype);
        const std::array<int64_t, 2> sha = {a.n_tokens, a.n_heads}, sta = {a.token_stride * es_a, a.head_stride * es_a};
        const std::array<int64_t, 2> shb = {b.n_tokens, b.n_heads}, stb = {b.token_stride * es_b, b.head_stride * es_b};
        const posenc::StridedRows ra{space.data() + origin_a, sha, sta, a.head_dim * es_a};
        const posenc::StridedRows rb{space.data() + origin_b, shb, stb, b.head_dim * es_b};
        if (posenc::RowsShareMemory(ra, rb) != MarkedOverlap(a, b, origin_a, origin_b)) __builtin_trap();
      }
    }
  }
  return 0;
}
