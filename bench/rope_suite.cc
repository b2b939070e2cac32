// apply_rope benchmark suite: see rope_suite.h.
#include "rope_suite.h"
#include "suite_util.h"

#include <fmt/format.h>
#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "posenc/blas/gemm.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

#ifndef POSENC_BENCH_DIR
#define POSENC_BENCH_DIR "bench"
#endif

namespace posenc::bench {
namespace {

// 64-byte aligned, uninitialised storage.
struct AlignedBuffer {
  void* p = nullptr;
  size_t bytes = 0;
  explicit AlignedBuffer(size_t n) : bytes(n) {
    p = std::aligned_alloc(64, (n + 63) / 64 * 64);
    if (p == nullptr) throw std::bad_alloc();
  }
  ~AlignedBuffer() { std::free(p); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
};

float LoadElem(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kF32:
      return static_cast<const float*>(base)[i];
    case DType::kBF16:
      return BF16ToF32(static_cast<const uint16_t*>(base)[i]);
    case DType::kF16:
      return F16ToF32(static_cast<const uint16_t*>(base)[i]);
  }
  return 0;
}

// Spacing of the storage format at magnitude |x| (float32 results need none: the bound already covers them).
double StorageUlp(DType t, double x) {
  if (t == DType::kF32) return 0.0;
  const int mant = t == DType::kBF16 ? 7 : 10;
  const int min_exp = t == DType::kBF16 ? -126 : -14;
  int e = 0;
  std::frexp(std::fabs(x), &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mant);
}

// HF's formulation as HF runs it, plainly in C++ (`hf_cpp`): per tensor, the temporary rot = rotate_half(x)
// = cat(-x2, x1) over the whole tensor, then a new tensor out = cat(x_rot * cos + rot * sin, x_pass) (GPT-NeoX's
// partial rotary: torch.cat puts the pass-through channels back). cos/sin rows span the rotated dim
// (cat(freqs, freqs)). rot has x's dtype (rotate_half is exact); the multiply-add is float32, rounded once.
template <typename Storage, float (*Load)(const Storage*), void (*Store)(Storage*, float)>
void HfRopeCppImpl(const Storage* x, Storage* rot, Storage* out, int64_t n_tokens, int64_t n_heads,
                   int64_t head_dim, int64_t rotary_dim, const float* cos_full, const float* sin_full) {
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {  // rot = rotate_half(x[..., :rotary_dim])
    for (int64_t h = 0; h < n_heads; ++h) {
      const Storage* xh = x + (t * n_heads + h) * head_dim;
      Storage* rh = rot + (t * n_heads + h) * rotary_dim;
      for (int64_t d = 0; d < half; ++d) Store(rh + d, -Load(xh + d + half));
      for (int64_t d = half; d < rotary_dim; ++d) rh[d] = xh[d - half];
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t) {  // out = cat(x_rot * cos + rot * sin, x_pass)
    const float* cos_row = cos_full + t * rotary_dim;
    const float* sin_row = sin_full + t * rotary_dim;
    for (int64_t h = 0; h < n_heads; ++h) {
      const Storage* xh = x + (t * n_heads + h) * head_dim;
      const Storage* rh = rot + (t * n_heads + h) * rotary_dim;
      Storage* oh = out + (t * n_heads + h) * head_dim;
      for (int64_t d = 0; d < rotary_dim; ++d)
        Store(oh + d, Load(xh + d) * cos_row[d] + Load(rh + d) * sin_row[d]);
      for (int64_t d = rotary_dim; d < head_dim; ++d) oh[d] = xh[d];
    }
  }
}

// The same arithmetic with the temporary kept to one head and the result written in place
// (`hf_cpp_per_head`): the best a plain C++ port does without SIMD code of its own.
template <typename Storage, float (*Load)(const Storage*), void (*Store)(Storage*, float)>
void HfRopeCppPerHeadImpl(Storage* x, int64_t n_tokens, int64_t n_heads, int64_t head_dim, int64_t rotary_dim,
                          const float* cos_full, const float* sin_full) {
  std::vector<float> rot(static_cast<size_t>(rotary_dim));
  const int64_t half = rotary_dim / 2;
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float* cos_row = cos_full + t * rotary_dim;
    const float* sin_row = sin_full + t * rotary_dim;
    for (int64_t h = 0; h < n_heads; ++h) {
      Storage* xh = x + (t * n_heads + h) * head_dim;
      for (int64_t d = 0; d < half; ++d) rot[d] = -Load(xh + d + half);
      for (int64_t d = half; d < rotary_dim; ++d) rot[d] = Load(xh + d - half);
      for (int64_t d = 0; d < rotary_dim; ++d) Store(xh + d, Load(xh + d) * cos_row[d] + rot[d] * sin_row[d]);
    }
  }
}
inline float LoadF32(const float* p) { return *p; }
inline void StoreF32(float* p, float v) { *p = v; }
inline float LoadBF16(const uint16_t* p) { return BF16ToF32(*p); }
inline void StoreBF16(uint16_t* p, float v) { *p = F32ToBF16(v); }
inline float LoadF16(const uint16_t* p) { return F16ToF32(*p); }
inline void StoreF16(uint16_t* p, float v) { *p = F32ToF16(v); }

}  // namespace

std::vector<RopeCase> DefaultRopeCases(const std::string& filter) {
  std::vector<RopeCase> all;
  auto add = [&](std::string stem, int64_t tokens, int64_t heads, int64_t k_heads, int64_t head_dim,
                 int64_t rotary_dim, RopeLayout layout, bool cold, std::vector<DType> dtypes) {
    for (DType dt : dtypes) {
      RopeCase c;
      c.name = fmt::format("{}_{}_{}", stem, layout == RopeLayout::kHalfSplit ? "neox" : "gptj",
                           dt == DType::kF32    ? "f32"
                           : dt == DType::kBF16 ? "bf16"
                                                : "f16");
      c.n_tokens = tokens;
      c.n_heads = heads;
      c.k_heads = k_heads;
      c.head_dim = head_dim;
      c.rotary_dim = rotary_dim;
      c.dtype = dt;
      c.layout = layout;
      c.cold = cold;
      all.push_back(c);
    }
  };
  const std::vector<DType> both{DType::kF32, DType::kBF16};
  const RopeLayout hs = RopeLayout::kHalfSplit, il = RopeLayout::kInterleaved;
  add("decode_qk_1x32x128", 1, 32, 32, 128, 128, hs, false, both);
  add("prefill_q_4096x32x128", 4096, 32, 0, 128, 128, hs, true, both);
  add("prefill_k_4096x8x128", 4096, 8, 0, 128, 128, hs, true, both);
  add("prefill_q_4096x32x64", 4096, 32, 0, 64, 64, hs, true, both);
  add("prefill_q_4096x32x96", 4096, 32, 0, 96, 96, hs, true, both);
  add("prefill_q_4096x32x64_rot16", 4096, 32, 0, 64, 16, hs, true, both);
  add("decode_qk_1x32x128", 1, 32, 32, 128, 128, il, false, both);
  add("prefill_q_4096x32x128", 4096, 32, 0, 128, 128, il, true, both);
  add("stories260k_qk_256x8x8", 256, 8, 4, 8, 8, il, false, {DType::kF32});
  std::vector<RopeCase> kept;
  for (const RopeCase& c : all) {
    if (MatchesFilter(c.name, filter)) kept.push_back(c);
  }
  return kept;
}

int64_t BytesMoved(const RopeCase& c) {
  return 2 * c.n_tokens * (c.n_heads + c.k_heads) * c.rotary_dim * DTypeSize(c.dtype);
}

// ---- workload --------------------------------------------------------------------------------------------

struct RopeWorkload::Buffers {
  int64_t q_elems = 0, k_elems = 0;
  std::unique_ptr<AlignedBuffer> q, k, q0, k0;  // working copies and originals
  std::unique_ptr<AlignedBuffer> q_rot, k_rot;  // hf_cpp: rotate_half temporaries [tokens, heads, rotary_dim]
  std::unique_ptr<AlignedBuffer> q_out, k_out;  // hf_cpp: its new output tensors
  std::vector<int64_t> rows;                    // [n_tokens]: row t = token t
  std::vector<int64_t> positions;               // [n_tokens]: position of token t (on the fly)
  std::vector<float> inv_freq;                  // [rotary_dim/2] (on the fly)
  CosSinTable table;                            // [n_tokens, rotary_dim/2]
  std::vector<float> cos_full, sin_full;        // HF: [n_tokens, rotary_dim] = cat(table, table)
};

RopeWorkload::RopeWorkload(const RopeCase& c) : case_(c), b_(std::make_unique<Buffers>()) {
  const int64_t es = DTypeSize(c.dtype);
  b_->q_elems = c.n_tokens * c.n_heads * c.head_dim;
  b_->k_elems = c.n_tokens * c.k_heads * c.head_dim;
  b_->q = std::make_unique<AlignedBuffer>(static_cast<size_t>(std::max<int64_t>(b_->q_elems, 1) * es));
  b_->q0 = std::make_unique<AlignedBuffer>(b_->q->bytes);
  b_->k = std::make_unique<AlignedBuffer>(static_cast<size_t>(std::max<int64_t>(b_->k_elems, 1) * es));
  b_->k0 = std::make_unique<AlignedBuffer>(b_->k->bytes);
  if (c.layout == RopeLayout::kHalfSplit) {  // preallocated (HF allocates per call; not timed here)
    const auto rot_bytes = [&](int64_t heads) {
      return static_cast<size_t>(std::max<int64_t>(c.n_tokens * heads * c.rotary_dim, 1) * es);
    };
    b_->q_rot = std::make_unique<AlignedBuffer>(rot_bytes(c.n_heads));
    b_->k_rot = std::make_unique<AlignedBuffer>(rot_bytes(c.k_heads));
    b_->q_out = std::make_unique<AlignedBuffer>(b_->q->bytes);
    b_->k_out = std::make_unique<AlignedBuffer>(b_->k->bytes);
    std::memset(b_->q_out->p, 0, b_->q_out->bytes);  // first touch outside the timings
    std::memset(b_->k_out->p, 0, b_->k_out->bytes);
    std::memset(b_->q_rot->p, 0, b_->q_rot->bytes);
    std::memset(b_->k_rot->p, 0, b_->k_rot->bytes);
  }
  std::mt19937_64 rng(20240601);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  auto fill = [&](void* p, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      const float v = u(rng);
      switch (c.dtype) {
        case DType::kF32:
          static_cast<float*>(p)[i] = v;
          break;
        case DType::kBF16:
          static_cast<uint16_t*>(p)[i] = F32ToBF16(v);
          break;
        case DType::kF16:
          static_cast<uint16_t*>(p)[i] = F32ToF16(v);
          break;
      }
    }
  };
  fill(b_->q0->p, b_->q_elems);
  fill(b_->k0->p, b_->k_elems);
  RopeParams params;
  params.head_dim = c.head_dim;
  params.rotary_dim = c.rotary_dim;
  params.rope_theta = 10000.0;
  std::vector<int64_t> positions(static_cast<size_t>(c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) positions[t] = c.n_tokens == 1 ? 4095 : t;
  const RopeFrequencies freqs = ComputeRopeFrequencies(params);
  b_->table = ComputeCosSin(freqs, positions);
  b_->positions = positions;
  b_->inv_freq = freqs.inv_freq;
  b_->rows.resize(static_cast<size_t>(c.n_tokens));
  for (int64_t t = 0; t < c.n_tokens; ++t) b_->rows[t] = t;
  const int64_t half = c.rotary_dim / 2;
  b_->cos_full.resize(static_cast<size_t>(c.n_tokens * c.rotary_dim));
  b_->sin_full.resize(b_->cos_full.size());
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    for (int64_t d = 0; d < c.rotary_dim; ++d) {
      b_->cos_full[t * c.rotary_dim + d] = b_->table.cos[t * half + d % half];
      b_->sin_full[t * c.rotary_dim + d] = b_->table.sin[t * half + d % half];
    }
  }
  Reset();
}

RopeWorkload::~RopeWorkload() = default;

void RopeWorkload::Reset() {
  std::memcpy(b_->q->p, b_->q0->p, b_->q->bytes);
  std::memcpy(b_->k->p, b_->k0->p, b_->k->bytes);
}

namespace {
kernels::RopeKernelArgs Args(const RopeCase& c, void* data, int64_t heads, const std::vector<int64_t>& rows,
                             const CosSinTable& table) {
  return {data,
          c.dtype,
          c.n_tokens,
          heads,
          heads * c.head_dim,
          c.head_dim,
          rows.data(),
          table.cos.data(),
          table.sin.data(),
          c.rotary_dim / 2,
          c.layout,
          RopeDirection::kForward};
}
}  // namespace

void RopeWorkload::RunSimd() {
  const RopeCase& c = case_;
  const kernels::RopeKernelArgs q = Args(c, b_->q->p, c.n_heads, b_->rows, b_->table);
  if (c.k_heads > 0) {
    kernels::RopeKernelQK(q, Args(c, b_->k->p, c.k_heads, b_->rows, b_->table));
  } else {
    kernels::RopeKernelSimd(q);
  }
}

void RopeWorkload::RunOnTheFly() {
  const RopeCase& c = case_;
  auto fly = [&](void* data, int64_t heads) {
    kernels::RopeKernelArgs a = Args(c, data, heads, b_->positions, b_->table);
    a.cos = a.sin = nullptr;
    a.inv_freq = b_->inv_freq.data();
    a.attention_factor = 1.0;
    a.precision = RopePrecision::kExact;
    return a;
  };
  if (c.k_heads > 0) {
    kernels::RopeKernelQK(fly(b_->q->p, c.n_heads), fly(b_->k->p, c.k_heads));
  } else {
    kernels::RopeKernelSimd(fly(b_->q->p, c.n_heads));
  }
}

void RopeWorkload::RunScalar() {
  const RopeCase& c = case_;
  kernels::RopeKernelScalar(Args(c, b_->q->p, c.n_heads, b_->rows, b_->table));
  if (c.k_heads > 0) kernels::RopeKernelScalar(Args(c, b_->k->p, c.k_heads, b_->rows, b_->table));
}

void RopeWorkload::RunHfCpp() {
  const RopeCase& c = case_;
  auto run = [&](const void* x, void* rot, void* out, int64_t heads) {
    const float* cf = b_->cos_full.data();
    const float* sf = b_->sin_full.data();
    switch (c.dtype) {
      case DType::kF32:
        HfRopeCppImpl<float, LoadF32, StoreF32>(static_cast<const float*>(x), static_cast<float*>(rot),
                                                static_cast<float*>(out), c.n_tokens, heads, c.head_dim,
                                                c.rotary_dim, cf, sf);
        break;
      case DType::kBF16:
        HfRopeCppImpl<uint16_t, LoadBF16, StoreBF16>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(rot),
                                                     static_cast<uint16_t*>(out), c.n_tokens, heads, c.head_dim,
                                                     c.rotary_dim, cf, sf);
        break;
      case DType::kF16:
        HfRopeCppImpl<uint16_t, LoadF16, StoreF16>(static_cast<const uint16_t*>(x), static_cast<uint16_t*>(rot),
                                                   static_cast<uint16_t*>(out), c.n_tokens, heads, c.head_dim,
                                                   c.rotary_dim, cf, sf);
        break;
    }
  };
  run(b_->q->p, b_->q_rot->p, b_->q_out->p, c.n_heads);
  if (c.k_heads > 0) run(b_->k->p, b_->k_rot->p, b_->k_out->p, c.k_heads);
}

void RopeWorkload::RunHfCppPerHead() {
  const RopeCase& c = case_;
  auto run = [&](void* data, int64_t heads) {
    const float* cf = b_->cos_full.data();
    const float* sf = b_->sin_full.data();
    switch (c.dtype) {
      case DType::kF32:
        HfRopeCppPerHeadImpl<float, LoadF32, StoreF32>(static_cast<float*>(data), c.n_tokens, heads, c.head_dim,
                                                       c.rotary_dim, cf, sf);
        break;
      case DType::kBF16:
        HfRopeCppPerHeadImpl<uint16_t, LoadBF16, StoreBF16>(static_cast<uint16_t*>(data), c.n_tokens, heads,
                                                            c.head_dim, c.rotary_dim, cf, sf);
        break;
      case DType::kF16:
        HfRopeCppPerHeadImpl<uint16_t, LoadF16, StoreF16>(static_cast<uint16_t*>(data), c.n_tokens, heads,
                                                          c.head_dim, c.rotary_dim, cf, sf);
        break;
    }
  };
  run(b_->q->p, c.n_heads);
  if (c.k_heads > 0) run(b_->k->p, c.k_heads);
}

void RopeWorkload::RunLayoutRmw() {
  const RopeCase& c = case_;
  auto flip = [&](void* data, int64_t heads) {
    const int64_t rows = c.n_tokens * heads;
    if (c.dtype == DType::kF32) {
      uint32_t* x = static_cast<uint32_t*>(data);
#pragma omp parallel for schedule(static) if (c.cold)
      for (int64_t r = 0; r < rows; ++r) {
        uint32_t* row = x + r * c.head_dim;
        for (int64_t d = 0; d < c.rotary_dim; ++d) row[d] ^= 0x80000000u;
      }
    } else {
      uint16_t* x = static_cast<uint16_t*>(data);
#pragma omp parallel for schedule(static) if (c.cold)
      for (int64_t r = 0; r < rows; ++r) {
        uint16_t* row = x + r * c.head_dim;
        for (int64_t d = 0; d < c.rotary_dim; ++d) row[d] ^= 0x8000u;
      }
    }
  };
  flip(b_->q->p, c.n_heads);
  if (c.k_heads > 0) flip(b_->k->p, c.k_heads);
}

void RopeWorkload::Run(const std::string& which) {
  if (which == "simd") {
    RunSimd();
  } else if (which == "on_the_fly") {
    RunOnTheFly();
  } else if (which == "scalar") {
    RunScalar();
  } else if (which == "hf_cpp") {
    RunHfCpp();
  } else if (which == "hf_cpp_per_head") {
    RunHfCppPerHead();
  } else if (which == "layout_rmw") {
    RunLayoutRmw();
  }
}

bool RopeWorkload::Has(const std::string& which) const {
  if (which == "simd" || which == "on_the_fly" || which == "scalar" || which == "layout_rmw") return true;
  return (which == "hf_cpp" || which == "hf_cpp_per_head") && case_.layout == RopeLayout::kHalfSplit;
}

std::string RopeWorkload::Validate(const std::string& which) {
  const RopeCase& c = case_;
  if (!Has(which) || which == "scalar") return "";  // nothing to compare
  const int64_t es = DTypeSize(c.dtype);
  Reset();
  RunScalar();
  std::vector<char> ref_q(b_->q->bytes), ref_k(b_->k->bytes);
  std::memcpy(ref_q.data(), b_->q->p, ref_q.size());
  std::memcpy(ref_k.data(), b_->k->p, ref_k.size());
  Reset();
  Run(which);
  const bool out_of_place = which == "hf_cpp";  // HF returns a new tensor
  const void* got_q = out_of_place ? b_->q_out->p : b_->q->p;
  const void* got_k = out_of_place ? b_->k_out->p : b_->k->p;
  const int64_t half = c.rotary_dim / 2;
  // On the fly, the coefficients differ from the table's by at most 1 ulp (2u relative), which moves an
  // output by 2u (|p1| + |p2|) more, and its own rounding is up to 2u larger than the reference's bound allows
  // for: 6u in all (derivation in tests/kernels/rope_kernels_test.cc, OnTheFlyMatchesTablePath).
  const double bound_u = which == "on_the_fly" ? 6.0 : 3.0;
  auto check = [&](const char* tensor, const void* orig, const void* got, const void* ref,
                   int64_t heads) -> std::string {
    for (int64_t t = 0; t < c.n_tokens; ++t) {
      const float* cs = b_->table.cos.data() + t * half;
      const float* sn = b_->table.sin.data() + t * half;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = (t * heads + h) * c.head_dim;
        for (int64_t d = 0; d < c.head_dim; ++d) {
          const int64_t e = base + d;
          if (d >= c.rotary_dim) {
            if (std::memcmp(static_cast<const char*>(got) + e * es, static_cast<const char*>(orig) + e * es,
                            static_cast<size_t>(es)) != 0) {
              return fmt::format("{}: pass-through channel changed at token {} head {} channel {}", tensor, t, h,
                                 d);
            }
            continue;
          }
          // Pair (ia, ib) and which member d is.
          const bool interleaved = c.layout == RopeLayout::kInterleaved;
          const int64_t i = interleaved ? d / 2 : d % half;
          const bool first = interleaved ? d % 2 == 0 : d < half;
          const int64_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half;
          const double a = LoadElem(c.dtype, orig, base + ia), b = LoadElem(c.dtype, orig, base + ib);
          const double m =
              first ? std::fabs(a * cs[i]) + std::fabs(b * sn[i]) : std::fabs(a * sn[i]) + std::fabs(b * cs[i]);
          const double g = LoadElem(c.dtype, got, e), r = LoadElem(c.dtype, ref, e);
          const double bound = bound_u * 0x1p-24 * m * (1 + 1e-6) + 0x1p-148 +
                               StorageUlp(c.dtype, std::max(std::fabs(g), std::fabs(r)));
          if (!(std::fabs(g - r) <= bound)) {
            return fmt::format("{}: token {} head {} channel {}: {} vs reference {} (bound {:.3g})", tensor, t, h,
                               d, g, r, bound);
          }
        }
      }
    }
    return "";
  };
  std::string err = check("q", b_->q0->p, got_q, ref_q.data(), c.n_heads);
  if (err.empty() && c.k_heads > 0) err = check("k", b_->k0->p, got_k, ref_k.data(), c.k_heads);
  Reset();
  return err;
}

// ---- references ------------------------------------------------------------------------------------------

double StreamCopyGbps(int threads, int64_t bytes_per_array, int reps) {
  const int64_t n = bytes_per_array / 4;
  AlignedBuffer a(static_cast<size_t>(n) * 4), b(static_cast<size_t>(n) * 4);
  float* pa = static_cast<float*>(a.p);
  float* pb = static_cast<float*>(b.p);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) pa[i] = 0.0f, pb[i] = 1.0f;  // first touch by the copying threads
  std::vector<double> gbps;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = Clock::now();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) pa[i] = pb[i];
    const double s = Seconds(t0, Clock::now());
    if (r > 0) gbps.push_back(2.0 * static_cast<double>(n) * 4 / s * 1e-9);  // first pass: warm-up
  }
  return Median(gbps);
}

double StreamRmwGbps(int threads, int64_t bytes, int reps) {
  const int64_t n = bytes / 4;
  AlignedBuffer a(static_cast<size_t>(n) * 4);
  float* pa = static_cast<float*>(a.p);
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t i = 0; i < n; ++i) pa[i] = 1.0f;
  std::vector<double> gbps;
  for (int r = 0; r < reps + 1; ++r) {
    const float k = (r % 2) ? 2.0f : 0.5f;  // exact, so the values never drift
    const auto t0 = Clock::now();
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int64_t i = 0; i < n; ++i) pa[i] = pa[i] * k;
    const double s = Seconds(t0, Clock::now());
    if (r > 0) gbps.push_back(2.0 * static_cast<double>(n) * 4 / s * 1e-9);
  }
  return Median(gbps);
}

double SgemmGflops(int threads, int64_t n, int reps) {
  std::vector<float> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  SetBlasThreads(threads);
  GemmNT(n, n, n, a.data(), n, b.data(), n, c.data(), n);
  std::vector<double> g;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    GemmNT(n, n, n, a.data(), n, b.data(), n, c.data(), n);
    g.push_back(2.0 * static_cast<double>(n) * n * n / Seconds(t0, Clock::now()) * 1e-9);
  }
  SetBlasThreads(1);
  return Median(g);
}

namespace {

// One timed variant of a case.
struct Variant {
  Variant(std::string n, std::function<void()> f) : name(std::move(n)), fn(std::move(f)) {}
  std::string name;
  std::function<void()> fn;
  int64_t batch = 1;             // hot cases: calls per timed batch
  std::vector<double> per_call;  // seconds
};

// Times every variant `reps` times, interleaved (rep r of each variant runs back to back), so load from other
// processes hits all variants alike. Cold cases flush the caches before each single timed call; hot cases
// time batches of calls sized to ~2 ms after a warm-up.
void TimeInterleaved(const RopeCase& c, int reps, std::vector<Variant>& variants) {
  for (Variant& v : variants) {
    v.fn();  // warm-up: page faults, OpenMP thread pool, code and tables in cache
    if (c.cold) continue;
    for (v.batch = 1;; v.batch *= 2) {
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < v.batch; ++i) v.fn();
      if (Seconds(t0, Clock::now()) > 2e-3 || v.batch > (int64_t{1} << 24)) break;
    }
  }
  for (int r = 0; r < reps; ++r) {
    for (Variant& v : variants) {
      if (c.cold) FlushCaches();
      const auto t0 = Clock::now();
      for (int64_t i = 0; i < v.batch; ++i) v.fn();
      v.per_call.push_back(Seconds(t0, Clock::now()) / static_cast<double>(v.batch));
    }
  }
}

// Runs bench/torch_rope_baseline.py on the half-split cases; returns name -> seconds per call, or notes why not.
std::map<std::string, double> RunTorchBaseline(const RopeBenchOptions& o, const std::vector<RopeCase>& cases,
                                               int threads, std::vector<std::string>& notes) {
  std::map<std::string, double> seconds;
  nlohmann::json spec;
  spec["threads"] = threads;
  spec["reps"] = o.reps;
  spec["cases"] = nlohmann::json::array();
  for (const RopeCase& c : cases) {
    if (c.layout != RopeLayout::kHalfSplit || c.dtype == DType::kF16) continue;
    spec["cases"].push_back({{"name", c.name},
                             {"n_tokens", c.n_tokens},
                             {"n_heads", c.n_heads},
                             {"k_heads", c.k_heads},
                             {"head_dim", c.head_dim},
                             {"rotary_dim", c.rotary_dim},
                             {"dtype", c.dtype == DType::kF32 ? "float32" : "bfloat16"},
                             {"cold", c.cold}});
  }
  if (spec["cases"].empty()) return seconds;
  const std::string script =
      o.torch_script.empty() ? std::string(POSENC_BENCH_DIR) + "/torch_rope_baseline.py" : o.torch_script;
  const nlohmann::json answer = RunPythonJson(o.python, script, spec, "torch_hf baseline", notes);
  if (answer.is_null()) return seconds;
  if (answer.contains("torch")) notes.push_back("torch_hf: PyTorch " + answer["torch"].get<std::string>());
  for (const auto& r : answer["results"]) seconds[r["name"].get<std::string>()] = r["seconds"].get<double>();
  if (answer.contains("errors")) {
    for (const auto& e : answer["errors"]) notes.push_back("torch_hf: " + e.get<std::string>());
  }
  return seconds;
}

}  // namespace

RopeBenchReport RunRopeBench(const RopeBenchOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  ValidateSuiteSettings(o.threads, o.stream_bytes);
  if (o.threads > 0) omp_set_num_threads(o.threads);
  RopeBenchReport rep;
  rep.threads = omp_get_max_threads();
  rep.hwy_target = kernels::RopeKernelTargetName();
  rep.cpu = fmt::format("{} ({} hardware threads), Highway target {}", CpuModel(),
                        std::thread::hardware_concurrency(), rep.hwy_target);
  const std::vector<RopeCase> cases = DefaultRopeCases(o.filter);
  rep.load_average_start = LoadAverage();

  log(fmt::format("STREAM copy ({} MiB arrays, {} and 1 threads)...", o.stream_bytes >> 20, rep.threads));
  rep.stream_copy_gbps = StreamCopyGbps(rep.threads, o.stream_bytes, std::max(o.reps, 5));
  rep.stream_copy_gbps_1thread = StreamCopyGbps(1, o.stream_bytes, std::max(o.reps, 5));
  rep.stream_rmw_gbps = StreamRmwGbps(rep.threads, o.stream_bytes, std::max(o.reps, 5));
  log(fmt::format("sgemm {}^3 ({} threads)...", o.sgemm_n, rep.threads));
  rep.sgemm_gflops = SgemmGflops(rep.threads, o.sgemm_n, 5);

  for (const RopeCase& c : cases) {
    log("case " + c.name + "...");
    RopeWorkload w(c);
    for (const char* which : {"simd", "on_the_fly", "hf_cpp", "hf_cpp_per_head"}) {
      const std::string err = w.Validate(which);
      if (!err.empty())
        throw std::runtime_error(fmt::format("{}: {} differs from the scalar reference: {}", c.name, which, err));
    }
    RopeResult r;
    r.c = c;
    r.bytes = BytesMoved(c);
    std::vector<Variant> variants;
    variants.emplace_back("posenc", [&] { w.RunSimd(); });
    variants.emplace_back("posenc_1thread", [&] {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(1);
      w.RunSimd();
      omp_set_num_threads(saved);
    });
    variants.emplace_back("on_the_fly", [&] { w.RunOnTheFly(); });
    variants.emplace_back("scalar", [&] { w.RunScalar(); });
    for (const char* name : {"hf_cpp", "hf_cpp_per_head"}) {
      if (w.Has(name)) variants.emplace_back(name, [&w, name] { w.Run(name); });
    }
    if (c.cold) variants.emplace_back("layout_rmw", [&] { w.RunLayoutRmw(); });
    TimeInterleaved(c, o.reps, variants);
    const double gb = static_cast<double>(r.bytes) * 1e-9;
    for (const Variant& v : variants) {
      const double best = *std::min_element(v.per_call.begin(), v.per_call.end());
      const double median = Median(v.per_call);
      if (v.name == "posenc") {
        r.ns_per_call = best * 1e9;
        r.ns_per_call_median = median * 1e9;
        r.gbps = gb / best;
        r.gbps_median = gb / median;
      } else if (v.name == "posenc_1thread") {
        r.gbps_1thread = gb / best;
      } else if (v.name == "layout_rmw") {
        r.limit_gbps = gb / best;
      } else if (v.name == "on_the_fly") {
        r.gbps_on_the_fly = gb / best;
        r.ns_per_call_on_the_fly = best * 1e9;
      } else {
        r.baselines[v.name] = gb / best;
        r.baseline_ns[v.name] = best * 1e9;
      }
    }
    r.pct_of_stream = 100.0 * r.gbps / rep.stream_copy_gbps;
    r.pct_of_stream_rmw = 100.0 * r.gbps / rep.stream_rmw_gbps;
    r.pct_of_limit = r.limit_gbps > 0 ? 100.0 * r.gbps / r.limit_gbps : 0.0;
    rep.results.push_back(std::move(r));
  }
  if (o.torch) {
    log("PyTorch HF baseline (" + o.python + ")...");
    const std::map<std::string, double> torch = RunTorchBaseline(o, cases, rep.threads, rep.notes);
    for (RopeResult& r : rep.results) {
      const auto it = torch.find(r.c.name);
      if (it == torch.end()) continue;
      r.baselines["torch_hf"] = static_cast<double>(r.bytes) * 1e-9 / it->second;
      r.baseline_ns["torch_hf"] = it->second * 1e9;
    }
  } else {
    rep.notes.push_back("torch_hf baseline not run (--no-torch)");
  }
  rep.load_average_end = LoadAverage();
  return rep;
}

nlohmann::json ToJson(const RopeBenchReport& rep) {
  nlohmann::json j;
  j["stream_copy_gbps"] = rep.stream_copy_gbps;
  j["stream_copy_gbps_1thread"] = rep.stream_copy_gbps_1thread;
  j["stream_rmw_gbps"] = rep.stream_rmw_gbps;
  j["sgemm_gflops"] = rep.sgemm_gflops;
  j["threads"] = rep.threads;
  j["cpu"] = rep.cpu;
  j["hwy_target"] = rep.hwy_target;
  j["load_average"] = {rep.load_average_start, rep.load_average_end};
  j["results"] = nlohmann::json::array();
  for (const RopeResult& r : rep.results) {
    nlohmann::json e;
    e["kernel"] = r.c.k_heads > 0 ? "apply_rope_qk" : "apply_rope";
    e["case"] = r.c.name;
    e["dtype"] = std::string(DTypeName(r.c.dtype));
    e["layout"] = r.c.layout == RopeLayout::kHalfSplit ? "half-split" : "interleaved";
    e["shape"] = {r.c.n_tokens, r.c.n_heads, r.c.head_dim};
    e["k_heads"] = r.c.k_heads;
    e["rotary_dim"] = r.c.rotary_dim;
    e["cold"] = r.c.cold;
    e["bytes"] = r.bytes;
    e["gbps"] = r.gbps;
    e["gbps_1thread"] = r.gbps_1thread;
    e["pct_of_stream"] = r.pct_of_stream;
    e["pct_of_stream_rmw"] = r.pct_of_stream_rmw;
    if (r.limit_gbps > 0) {
      e["layout_rmw_gbps"] = r.limit_gbps;
      e["pct_of_layout_rmw"] = r.pct_of_limit;
    }
    e["ns_per_call"] = r.ns_per_call;
    e["ns_per_call_median"] = r.ns_per_call_median;
    e["gbps_median"] = r.gbps_median;
    if (r.gbps_on_the_fly > 0) {
      e["on_the_fly_gbps"] = r.gbps_on_the_fly;
      e["on_the_fly_ns_per_call"] = r.ns_per_call_on_the_fly;
      e["on_the_fly_vs_table"] = r.ns_per_call / r.ns_per_call_on_the_fly;
    }
    PutBaselines(e, r.gbps, r.baselines, r.baseline_ns);
    j["results"].push_back(e);
  }
  j["notes"] = rep.notes;
  return j;
}

std::string FormatReport(const RopeBenchReport& rep) {
  std::string s;
  s += fmt::format("load average (1 min) at start / end: {:.2f} / {:.2f}\n", rep.load_average_start,
                   rep.load_average_end);
  s += fmt::format(
      "cpu: {}\nthreads: {}\nSTREAM copy: {:.1f} GB/s ({} thread(s)), {:.1f} GB/s (1 thread); in-place "
      "read-modify-write: {:.1f} GB/s\nOpenBLAS sgemm: {:.1f} GFLOP/s\n\n",
      rep.cpu, rep.threads, rep.stream_copy_gbps, rep.threads, rep.stream_copy_gbps_1thread, rep.stream_rmw_gbps,
      rep.sgemm_gflops);
  s += fmt::format("{:<38} {:>7} {:>7} {:>7} {:>5} {:>5} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8}\n", "case", "GB/s",
                   "GB/s 1t", "%STREAM", "%RMW", "%lim", "ns/call", "x scalar", "x hf_cpp", "x hf_ph", "x torch",
                   "1t x hf");
  for (const RopeResult& r : rep.results) {
    auto ratio = [&](const char* name, double g) {
      const auto it = r.baselines.find(name);
      return it == r.baselines.end() ? std::string("-") : fmt::format("{:.1f}", g / it->second);
    };
    const std::string lim = r.limit_gbps > 0 ? fmt::format("{:.0f}", r.pct_of_limit) : std::string("-");
    s += fmt::format("{:<38} {:>7.2f} {:>7.2f} {:>7.1f} {:>5.0f} {:>5} {:>10.0f} {:>8} {:>8} {:>8} {:>8} {:>8}\n",
                     r.c.name, r.gbps, r.gbps_1thread, r.pct_of_stream, r.pct_of_stream_rmw, lim, r.ns_per_call,
                     ratio("scalar", r.gbps), ratio("hf_cpp", r.gbps), ratio("hf_cpp_per_head", r.gbps),
                     ratio("torch_hf", r.gbps), ratio("hf_cpp", r.gbps_1thread));
  }
  s += "\nbaselines (GB/s, best call): case: scalar / hf_cpp / hf_cpp_per_head / torch_hf\n";
  for (const RopeResult& r : rep.results) {
    auto g = [&](const char* name) {
      const auto it = r.baselines.find(name);
      return it == r.baselines.end() ? std::string("-") : fmt::format("{:.2f}", it->second);
    };
    s += fmt::format("  {:<38} {:>7} / {:>7} / {:>7} / {:>7}\n", r.c.name, g("scalar"), g("hf_cpp"),
                     g("hf_cpp_per_head"), g("torch_hf"));
  }
  s += "\ncos/sin on the fly vs table (posenc, default threads, best call): case: table ns / on-the-fly ns "
       "(table time / on-the-fly time)\n";
  for (const RopeResult& r : rep.results) {
    if (r.gbps_on_the_fly <= 0) continue;
    s += fmt::format("  {:<38} {:>10.0f} / {:>10.0f} ({:.2f})\n", r.c.name, r.ns_per_call, r.ns_per_call_on_the_fly,
                     r.ns_per_call / r.ns_per_call_on_the_fly);
  }
  for (const std::string& n : rep.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace posenc::bench
