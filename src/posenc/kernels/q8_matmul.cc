#include "posenc/kernels/q8_matmul.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>
#include <omp.h>

#if defined(__x86_64__)
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 warns inside its own AVX-512 headers (their _mm512_undefined_* placeholders) when they are inlined here.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>
#define POSENC_Q8_X86 1
// The VNNI kernel's functions are compiled for that ISA alone and called only after Q8VnniAvailable().
#define POSENC_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni")))
#endif

#include "posenc/core/dtype.h"
#include "posenc/core/errors.h"
#include "posenc/core/huge_page_buffer.h"
#include "posenc/core/threads.h"

namespace posenc {
namespace {

constexpr int64_t kRows = Q8Weights::kPanelRows;               // 16 output rows per panel
constexpr int64_t kBlk = Q8Weights::kBlock;                    // 32 values per block
constexpr int64_t kGroups = kBlk / 4;                          // 8 groups of 4 bytes (one vpdpbusd each)
constexpr int64_t kCodeBytes = kRows * kBlk;                   // 512: codes + 128 [group][row][4], uint8
constexpr int64_t kPanelBlockBytes = kCodeBytes + kRows * 4;   // + the rows' float16 scales as float32 [16]
constexpr int64_t kSrcBlockBytes = 2 + kBlk;                   // block_q8_0: float16 d, int8 qs[32]
constexpr int64_t kTile = 8;                                   // activation rows per register tile
constexpr int64_t kGroupPanels = 8;                            // panels per unit of work (threads)
constexpr int64_t kChunkRows = 128;                            // activation rows per pass over a unit (a multiple of kTile)

const float* Scales(const uint8_t* pb) { return reinterpret_cast<const float*>(pb + kCodeBytes); }

// The block's float16 scale (as float32) and the reciprocal the codes are formed with; a block whose float16
// scale is 0 contributes 0 whatever its codes, so they are 0 (this also keeps 1/d finite: a d below float16's
// range has a reciprocal that may overflow).
struct BlockScale {
  float d_half = 0.0f;
  float id = 0.0f;
};
BlockScale ScaleOf(float amax) {
  const float d = amax / 127.0f;
  BlockScale s;
  s.d_half = F16ToF32(F32ToF16(d));
  s.id = s.d_half != 0.0f ? 1.0f / d : 0.0f;
  return s;
}

bool QuantizeRowScalar(int64_t in, const float* x, int8_t* q, float* d) {
  for (int64_t i = 0; i < in; ++i) {
    if (!std::isfinite(x[i])) return false;
  }
  for (int64_t b = 0; b < in / kBlk; ++b) {
    const float* xb = x + b * kBlk;
    float amax = 0.0f;
    for (int64_t k = 0; k < kBlk; ++k) amax = std::max(amax, std::fabs(xb[k]));
    const BlockScale s = ScaleOf(amax);
    d[b] = s.d_half;
    for (int64_t k = 0; k < kBlk; ++k) {
      q[b * kBlk + k] = static_cast<int8_t>(std::roundf(xb[k] * s.id));
    }
  }
  return true;
}

// out [t][16] = the panel's 16 outputs for activation rows t < n_t (n_t <= kTile) of one tile (the layout Multiply builds), as
// documented on Multiply: s = comp + sum_k (w_k + 128) q_k = sum_k w_k q_k with comp = -128 sum_k q_k, the integer
// sum the vector kernel forms (vpdpbusd multiplies unsigned by signed bytes).
void PanelTileScalar(const uint8_t* panel, int64_t n_blocks, const int8_t* q, const float* d, const int32_t* comp,
                     int64_t n_t, float* out) {
  for (int64_t t = 0; t < n_t; ++t) {
    for (int64_t r = 0; r < kRows; ++r) {
      float p = 0.0f;
      for (int64_t b = 0; b < n_blocks; ++b) {
        const uint8_t* pb = panel + b * kPanelBlockBytes;
        const int8_t* qb = q + b * kTile * kBlk;
        int32_t s = comp[b * kTile + t];
        for (int64_t g = 0; g < kGroups; ++g) {
          for (int64_t k = 0; k < 4; ++k) {
            s += static_cast<int32_t>(pb[(g * kRows + r) * 4 + k]) * static_cast<int32_t>(qb[(g * kTile + t) * 4 + k]);
          }
        }
        const float scale = Scales(pb)[r] * d[b * kTile + t];
        p = std::fma(static_cast<float>(s), scale, p);
      }
      out[t * kRows + r] = p;
    }
  }
}

#if POSENC_Q8_X86
POSENC_VNNI_TARGET bool QuantizeRowVnni(int64_t in, const float* x, int8_t* q, float* d) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  const __m512 max_finite = _mm512_set1_ps(std::numeric_limits<float>::max());
  __mmask16 finite = 0xffff;
  for (int64_t i = 0; i + 16 <= in; i += 16) {  // NaN compares false, so it clears the mask too
    finite &= _mm512_cmp_ps_mask(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)), max_finite, _CMP_LE_OQ);
  }
  if (finite != 0xffff) return false;
  const __m512 half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int64_t b = 0; b < in / kBlk; ++b) {
    const float* xb = x + b * kBlk;
    const __m512 v0 = _mm512_loadu_ps(xb), v1 = _mm512_loadu_ps(xb + 16);
    const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
    const BlockScale s = ScaleOf(amax);
    d[b] = s.d_half;
    const __m512 id = _mm512_set1_ps(s.id);
    const __m512 vs[2] = {v0, v1};
    for (int h = 0; h < 2; ++h) {
      // roundf: half away from zero, from floor of |v| and its exact fraction.
      const __m512 scaled = _mm512_mul_ps(vs[h], id);
      const __m512 a = _mm512_andnot_ps(sign, scaled);
      const __m512 f = _mm512_roundscale_ps(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(a, f), half, _CMP_GE_OQ);
      const __m512 r = _mm512_or_ps(_mm512_mask_add_ps(f, up, f, one), _mm512_and_ps(sign, scaled));
      const __m512i codes = _mm512_cvttps_epi32(r);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + b * kBlk + h * 16), _mm512_cvtepi32_epi8(codes));
    }
  }
  return true;
}

// Per block: the 8 groups outermost, so the T rows' integer sums are T independent chains of vpdpbusd, each with
// its activation bytes broadcast from memory inside the instruction (the signed operand). Activations come
// interleaved per tile (the layout Multiply builds), so every operand is at a constant offset from one pointer.
template <int T>
POSENC_VNNI_TARGET void PanelTileVnni(const uint8_t* panel, int64_t n_blocks, const int8_t* q, const float* d,
                                      const int32_t* comp, float* out) {
  __m512 acc[T];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
  for (int64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* pb = panel + b * kPanelBlockBytes;
    const int8_t* qb = q + b * kTile * kBlk;
    __m512i s[T];
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) s[t] = _mm512_set1_epi32(comp[b * kTile + t]);
#pragma GCC unroll 8
    for (int64_t g = 0; g < kGroups; ++g) {
      const __m512i w = _mm512_load_si512(pb + 64 * g);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) {
        // vpdpbusd with the 4 activation bytes as its broadcast memory operand ({1to16}), which compilers do not
        // form from _mm512_set1_epi32 of a load.
        const int32_t* four = reinterpret_cast<const int32_t*>(qb + (g * kTile + t) * 4);  // read by the asm only
        __asm__("vpdpbusd %[x]%{1to16%}, %[w], %[s]" : [s] "+v"(s[t]) : [w] "v"(w), [x] "m"(*four));
      }
    }
    const __m512 dw = _mm512_load_ps(Scales(pb));
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(d[b * kTile + t]));
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s[t]), scale, acc[t]);
    }
  }
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) _mm512_storeu_ps(out + t * kRows, acc[t]);
}

POSENC_VNNI_TARGET void PanelTileVnniAny(const uint8_t* panel, int64_t n_blocks, const int8_t* q, const float* d,
                                         const int32_t* comp, int64_t n_t, float* out) {
  switch (n_t) {
    case 1: PanelTileVnni<1>(panel, n_blocks, q, d, comp, out); break;
    case 2: PanelTileVnni<2>(panel, n_blocks, q, d, comp, out); break;
    case 3: PanelTileVnni<3>(panel, n_blocks, q, d, comp, out); break;
    case 4: PanelTileVnni<4>(panel, n_blocks, q, d, comp, out); break;
    case 5: PanelTileVnni<5>(panel, n_blocks, q, d, comp, out); break;
    case 6: PanelTileVnni<6>(panel, n_blocks, q, d, comp, out); break;
    case 7: PanelTileVnni<7>(panel, n_blocks, q, d, comp, out); break;
    default: PanelTileVnni<8>(panel, n_blocks, q, d, comp, out); break;
  }
}
#endif

Q8Kernel Resolve(Q8Kernel kernel) {
  if (kernel == Q8Kernel::kAuto) return Q8VnniAvailable() ? Q8Kernel::kVnni : Q8Kernel::kScalar;
  if (kernel == Q8Kernel::kVnni && !Q8VnniAvailable()) {
    throw ConfigError("Q8Kernel::kVnni needs AVX512F, AVX512BW and AVX512-VNNI, which this CPU lacks");
  }
  return kernel;
}

bool QuantizeRow(Q8Kernel kernel, int64_t in, const float* x, int8_t* q, float* d) {
#if POSENC_Q8_X86
  if (kernel == Q8Kernel::kVnni) return QuantizeRowVnni(in, x, q, d);
#endif
  (void)kernel;
  return QuantizeRowScalar(in, x, q, d);
}

// QuantizeRow, then QuantizeQ8Rows's refusal of a block whose float16 scale overflowed, naming activation row
// `row`. Returns false for a row holding a NaN or infinity (not quantized).
bool QuantizeRowChecked(Q8Kernel kernel, int64_t in, const float* x, int8_t* q, float* d, int64_t row) {
  if (!QuantizeRow(kernel, in, x, q, d)) return false;
  for (int64_t b = 0; b < in / kBlk; ++b) {
    if (!std::isinf(d[b])) continue;
    float amax = 0.0f;
    for (int64_t c = 0; c < kBlk; ++c) amax = std::max(amax, std::fabs(x[b * kBlk + c]));
    throw NumericError(fmt::format("int8 compute: activation row {} holds a block (values {}-{}) with max |x| = {}, "
                                   "beyond what a Q8_0 block's float16 scale holds (max |x| / 127 <= 65504); use "
                                   "`compute` f32 or bf16", row, b * kBlk, b * kBlk + kBlk - 1, amax));
  }
  return true;
}

}  // namespace

bool Q8VnniAvailable() {
#if POSENC_Q8_X86
  static const bool available = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                                __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
                                __builtin_cpu_supports("avx512vnni");
  return available;
#else
  return false;
#endif
}

std::string Q8KernelDescription() { return Q8VnniAvailable() ? "vnni (AVX512-VNNI vpdpbusd)" : "scalar"; }

void QuantizeQ8Rows(int64_t n, int64_t in, const float* x, int64_t ldx, int8_t* q, float* d, uint8_t* finite,
                    Q8Kernel kernel) {
  if (n < 0 || in < 0 || in % kBlk != 0 || ldx < in) {
    throw ShapeError(fmt::format("QuantizeQ8Rows: n >= 0, in a multiple of 32 and ldx >= in needed, got n={} in={} "
                                 "ldx={}", n, in, ldx));
  }
  const Q8Kernel k = Resolve(kernel);
  for (int64_t t = 0; t < n; ++t) {
    finite[t] = QuantizeRowChecked(k, in, x + t * ldx, q + t * in, d + t * (in / kBlk), t) ? 1 : 0;
  }
}

Q8Weights::Q8Weights(int64_t rows, int64_t cols, const void* w) : rows_(rows), cols_(cols) {
  if (rows < 0 || cols < 0 || cols % kBlk != 0) {
    throw ShapeError(fmt::format("Q8Weights: rows >= 0 and cols a multiple of 32 needed, got rows={} cols={}", rows,
                                 cols));
  }
  n_panels_ = (rows + kRows - 1) / kRows;
  const int64_t n_blocks = cols / kBlk;
  const uint8_t* src = static_cast<const uint8_t*>(w);
  for (int64_t r = 0; r < rows; ++r) {  // every scale checked before any work
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint16_t half;
      std::memcpy(&half, src + (r * n_blocks + b) * kSrcBlockBytes, 2);
      const float scale = F16ToF32(half);
      if (!std::isfinite(scale)) {
        throw ConfigError(fmt::format("Q8Weights: the scale of row {} block {} is {}", r, b, scale));
      }
    }
  }
  const int64_t total = n_panels_ * n_blocks * kPanelBlockBytes;
  storage_ = HugePageBuffer(static_cast<size_t>(total));
  base_ = storage_.data();
  // Every byte is written below (padding rows: code 0, scale 0), each panel by one thread, so the pages are
  // first touched in parallel.
#pragma omp parallel for schedule(static) if (!omp_in_parallel() && n_panels_ * n_blocks > 4096)
  for (int64_t p = 0; p < n_panels_; ++p) {
    for (int64_t b = 0; b < n_blocks; ++b) {
      uint8_t* pb = base_ + (p * n_blocks + b) * kPanelBlockBytes;
      for (int64_t j = 0; j < kRows; ++j) {
        const int64_t r = p * kRows + j;
        float scale = 0.0f;
        if (r < rows) {
          const uint8_t* blk = src + (r * n_blocks + b) * kSrcBlockBytes;
          uint16_t half;
          std::memcpy(&half, blk, 2);
          scale = F16ToF32(half);
          for (int64_t c = 0; c < kBlk; ++c) {
            pb[((c / 4) * kRows + j) * 4 + c % 4] = static_cast<uint8_t>(static_cast<int8_t>(blk[2 + c]) + 128);
          }
        } else {
          for (int64_t c = 0; c < kBlk; ++c) pb[((c / 4) * kRows + j) * 4 + c % 4] = 128;
        }
        std::memcpy(pb + kCodeBytes + 4 * j, &scale, 4);
      }
    }
  }
}

Q8Weights::~Q8Weights() = default;
Q8Weights::Q8Weights(Q8Weights&&) noexcept = default;
Q8Weights& Q8Weights::operator=(Q8Weights&&) noexcept = default;

int64_t Q8Weights::bytes() const { return n_panels_ * (cols_ / kBlk) * kPanelBlockBytes; }

void Q8Weights::Multiply(int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy, float beta, int threads,
                         Q8Kernel kernel) const {
  if (n < 0) throw ShapeError(fmt::format("Q8Weights::Multiply: n must be >= 0, got {}", n));
  if (ldx < cols_ || ldy < rows_) {
    throw ShapeError(fmt::format("Q8Weights::Multiply: strides must cover the rows, got ldx={} (cols {}), ldy={} "
                                 "(rows {})", ldx, cols_, ldy, rows_));
  }
  const Q8Kernel k = Resolve(kernel);
  if (n == 0 || rows_ == 0) return;
  const int64_t n_blocks = cols_ / kBlk;
  // Each row quantized (as QuantizeQ8Rows) straight into its tile of kTile rows, interleaved [block][group][row][4],
  // with the rows' scales and -128 times their block sums [block][row]; rows past n in the last tile are zeros.
  const int64_t n_tiles = (n + kTile - 1) / kTile;
  thread_local std::vector<int8_t> tq, row_q;
  thread_local std::vector<float> td, row_d;
  thread_local std::vector<int32_t> tc;
  thread_local std::vector<uint8_t> finite;
  tq.assign(static_cast<size_t>(n_tiles * n_blocks * kTile * kBlk), 0);
  td.assign(static_cast<size_t>(n_tiles * n_blocks * kTile), 0.0f);
  tc.assign(td.size(), 0);
  row_q.resize(static_cast<size_t>(cols_));
  row_d.resize(static_cast<size_t>(n_blocks));
  finite.resize(static_cast<size_t>(n));
  for (int64_t t = 0; t < n; ++t) {
    finite[static_cast<size_t>(t)] = QuantizeRowChecked(k, cols_, x + t * ldx, row_q.data(), row_d.data(), t) ? 1 : 0;
    const int64_t tile = t / kTile, lane = t % kTile;
    for (int64_t b = 0; b < n_blocks; ++b) {
      const int8_t* src = row_q.data() + b * kBlk;
      int8_t* dst = tq.data() + (tile * n_blocks + b) * kTile * kBlk + lane * 4;
      int32_t sum = 0;
      for (int64_t g = 0; g < kGroups; ++g) {
        for (int64_t c = 0; c < 4; ++c) {
          dst[g * kTile * 4 + c] = src[g * 4 + c];
          sum += src[g * 4 + c];
        }
      }
      td[static_cast<size_t>((tile * n_blocks + b) * kTile + lane)] = row_d[static_cast<size_t>(b)];
      tc[static_cast<size_t>((tile * n_blocks + b) * kTile + lane)] = -128 * sum;
    }
  }
  const int8_t* qp = tq.data();
  const float* dp = td.data();
  const int32_t* cp = tc.data();
  const uint8_t* fp = finite.data();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Work in units of kGroupPanels panels; inside one, kChunkRows activation rows at a time against each panel
  // of the unit, so a unit's weights and a chunk's codes stay in L2 while they are reused.
  auto run_unit = [&](int64_t unit) {
    alignas(64) float tile[kTile * kRows];
    const int64_t p_end = std::min(n_panels_, (unit + 1) * kGroupPanels);
    for (int64_t c0 = 0; c0 < n; c0 += kChunkRows) {
      const int64_t c1 = std::min(n, c0 + kChunkRows);
      for (int64_t p = unit * kGroupPanels; p < p_end; ++p) {
        const uint8_t* panel = base_ + p * n_blocks * kPanelBlockBytes;
        const int64_t r0 = p * kRows, nr = std::min(kRows, rows_ - r0);
        for (int64_t t0 = c0; t0 < c1; t0 += kTile) {
          const int64_t nt = std::min(kTile, c1 - t0);
          const int64_t tile_at = (t0 / kTile) * n_blocks;
          const int8_t* qt = qp + tile_at * kTile * kBlk;
          const float* dt = dp + tile_at * kTile;
          const int32_t* ct = cp + tile_at * kTile;
#if POSENC_Q8_X86
          if (k == Q8Kernel::kVnni) {
            PanelTileVnniAny(panel, n_blocks, qt, dt, ct, nt, tile);
          } else {
            PanelTileScalar(panel, n_blocks, qt, dt, ct, nt, tile);
          }
#else
          PanelTileScalar(panel, n_blocks, qt, dt, ct, nt, tile);
#endif
          for (int64_t t = 0; t < nt; ++t) {
            float* yr = y + (t0 + t) * ldy + r0;
            const float* pr = tile + t * kRows;
            if (fp[t0 + t] == 0) {
              std::fill(yr, yr + nr, nan);
            } else if (beta == 0.0f) {
              std::copy(pr, pr + nr, yr);
            } else {
              for (int64_t j = 0; j < nr; ++j) yr[j] = std::fma(beta, yr[j], pr[j]);
            }
          }
        }
      }
    }
  };
  const int64_t n_units = (n_panels_ + kGroupPanels - 1) / kGroupPanels;
  // At most one thread per 2^20 multiply-adds, so small products stay on the calling thread.
  const int64_t work = n * rows_ * cols_;
  const int want = omp_in_parallel() ? 1 : ResolveThreads(threads, "threads");
  const int n_threads = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({want, n_units, work >> 20})));
  if (n_threads <= 1) {
    for (int64_t u = 0; u < n_units; ++u) run_unit(u);
    return;
  }
#pragma omp parallel for num_threads(n_threads) schedule(dynamic, 1)
  for (int64_t u = 0; u < n_units; ++u) run_unit(u);
}

}  // namespace posenc
