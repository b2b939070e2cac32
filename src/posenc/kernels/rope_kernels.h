// RoPE rotation kernels: pointers, sizes and strides only (no validation, no exceptions, no I/O).
// The public wrappers in rope/apply.h validate and then call RopeKernel / RopeKernelQK. This is the one
// boundary the SIMD implementation (rope_kernels.cc, Highway, runtime dispatch) sits behind;
// RopeKernelScalar (rope_kernels_scalar.cc) stays as the reference every fast path is tested against, and
// stays selectable at run time (SetRopeKernelPath or the environment variable POSENC_KERNEL=scalar).
#pragma once

#include <cstdint>

#include "posenc/core/dtype.h"
#include "posenc/core/rope_enums.h"

namespace posenc::kernels {

/// One in-place rotation call. Preconditions (checked by the caller, HWY_DASSERT-ed in debug builds):
/// 1 <= half, 2*half <= head_dim, every rows[t] in [0, n_rows), strides large enough that heads and tokens do
/// not overlap (|head_stride| >= head_dim when n_heads > 1, distinct tokens), data non-null when
/// n_tokens * n_heads > 0.
///
/// Coefficients come from one of two sources:
///   table (inv_freq == nullptr): token t uses row rows[t] of cos/sin;
///   on the fly (inv_freq != nullptr): cos/sin are not read; rows[t] is token t's position id, and its
///     coefficients are SinCosRow(inv_freq, half, rows[t], attention_factor, precision) (sincos.h: within 1
///     ulp of ComputeCosSin's row for that position), computed once per token for all its heads (Q and K).
///     Preconditions: |rows[t]| < kSinCosMaxAbs and |rows[t] * inv_freq[i]| < kSinCosMaxAbs,
///     attention_factor finite.
struct RopeKernelArgs {
  void* data;  // [n_tokens, n_heads, head_dim] elements of `dtype`, innermost contiguous
  DType dtype;
  int64_t n_tokens;
  int64_t n_heads;
  int64_t token_stride;  // elements
  int64_t head_stride;   // elements
  const int64_t* rows;   // [n_tokens]: table row of each token
  const float* cos;      // [n_rows, half]
  const float* sin;      // [n_rows, half]
  int64_t half;          // rotary_dim / 2; channels >= 2*half are not touched
  RopeLayout layout;
  RopeDirection direction;
  const float* inv_freq = nullptr;  // [half] radians/token: on-the-fly mode (see above); nullptr: table mode
  double attention_factor = 1.0;    // on the fly: multiplies cos and sin (1.0: AttentionFold::kApart)
  RopePrecision precision = RopePrecision::kExact;  // on the fly: how the angle is formed (RopePrecision)
};

/// Scalar reference: widens each element to float32, rotates with separately rounded products (no fused
/// multiply-add; the library is built with -ffp-contract=off), rounds back once (nearest even).
///
/// Shapes/Layout: see RopeKernelArgs; pair i is (2i, 2i+1) for kInterleaved, (i, i+half) for kHalfSplit,
///          rotated by (cos[rows[t], i], sin[rows[t], i]) (on the fly: by SinCosRowScalar's values). In place. Channels [2*half, head_dim) are not read
///          or written. Single-threaded.
/// Precision: against exact arithmetic on the stored inputs and table values, each float32 result is within
///          2u (|p1| + |p2|) (kForward, kBackward) or 6u (|p1| + |p2|) / (c^2 + s^2) (kInverse, including the
///          rounding of 1/(c^2 + s^2)) before the storage rounding, p1, p2 the two products forming it,
///          u = 2^-24.
void RopeKernelScalar(const RopeKernelArgs& args);

/// Highway SIMD path (runtime dispatch over AVX3 / AVX2 / SSE4 / SSSE3 / SCALAR), whatever the selected path.
/// Tests and benchmarks call it directly; the library calls RopeKernel / RopeKernelQK.
///
/// Shapes/Layout: as RopeKernelScalar. In place; channels [2*half, head_dim) and memory outside the view are
///          never read or written. Each token's cos/sin row is read once for all its heads; when heads are
///          small (2*half <= vector lanes and divides them, heads contiguous and fully rotated: stories260K's
///          head_dim 8) one vector spans several heads. On the fly, the token's cos/sin are computed once
///          (SinCosRow) for all its heads. bfloat16 is rotated as 32-bit words of two elements (no widening or
///          packing) and rounded to nearest even in integer SIMD, as F32ToBF16 rounds (NaN stays NaN);
///          float16 uses F16C on AVX2/AVX3 and the scalar reference on older targets (no F16C there).
/// Threads: when the call moves >= kRopeParallelMinBytes and has >= 2 tokens (and no parallel region is
///          active), OpenMP threads take blocks of ~256 KiB of tokens in turn (dynamic schedule), at most one
///          thread per kRopeParallelMinBytes / 2; smaller calls, decode (1 token) included, run on the caller
///          without touching OpenMP.
/// Precision: every output fuses its own element's product with c and rounds its partner's product with s:
///          a' = fl(a c - fl(b s)), b' = fl(b c + fl(a s)) on AVX2/AVX3 (fused multiply-add), both products
///          rounded on SSE4/SSSE3/SCALAR (then equal to RopeKernelScalar for kForward/kBackward). Hence both
///          layouts give identical bits for the same pair on every target, and against RopeKernelScalar each
///          float32 result differs by at most 3u (|p1| + |p2|) (kForward, kBackward) or
///          6u (|p1| + |p2|) / (c^2 + s^2) (kInverse, whose coefficients c/(c^2+s^2), s/(c^2+s^2) are formed
///          once per token), p1, p2 the two products forming the output, u = 2^-24. bfloat16/float16 results
///          are one rounding of that float32 value, so they differ from the reference's by at most one unit of
///          the storage format (and not at all where the float32 values agree).
void RopeKernelSimd(const RopeKernelArgs& args);

/// Q and K of the same tokens in one pass: per token, the cos/sin row (and any coefficients derived from it)
/// is read (or, on the fly, computed) once and applied to q's heads, then k's. q and k must agree in n_tokens,
/// rows, cos, sin, inv_freq, attention_factor, precision, half, layout and direction (n_heads, strides and
/// dtype may differ: GQA, packed qkv). k.n_heads == 0 rotates q
/// only. Otherwise as RopeKernelSimd; with the scalar path selected, two RopeKernelScalar calls.
void RopeKernelQK(const RopeKernelArgs& q, const RopeKernelArgs& k);

/// The kernel the library calls: RopeKernelSimd, or RopeKernelScalar when the scalar path is selected.
void RopeKernel(const RopeKernelArgs& args);

/// Which implementation RopeKernel / RopeKernelQK run.
///   kAuto:   the Highway path, best target the CPU supports (the default).
///   kScalar: RopeKernelScalar (reference; single-threaded).
/// The initial value comes from the environment variable POSENC_KERNEL, read once on first use:
/// "scalar" selects kScalar; unset, empty, "auto" or "simd" select kAuto (any other value: kAuto).
enum class RopeKernelPath { kAuto, kScalar };

/// Selects the path for subsequent calls, process-wide (an atomic; safe to call from any thread, but calls
/// already running keep the path they started with). Overrides POSENC_KERNEL.
void SetRopeKernelPath(RopeKernelPath path);

/// The path RopeKernel currently runs.
RopeKernelPath GetRopeKernelPath();

/// Name of the Highway target RopeKernelSimd dispatches to on this CPU ("AVX2", "AVX3", "SSE4", ...);
/// honours hwy::DisableTargets / SetSupportedTargetsForTest.
const char* RopeKernelTargetName();

/// Calls that move fewer bytes than this (rotated channels read + written, Q and K together) run on the
/// calling thread; larger ones with >= 2 tokens use OpenMP threads (see RopeKernelSimd).
inline constexpr int64_t kRopeParallelMinBytes = int64_t{1} << 20;

}  // namespace posenc::kernels
