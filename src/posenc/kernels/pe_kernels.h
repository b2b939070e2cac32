// Absolute positional-encoding kernels: row gather, gather-add, scatter-add and the SGD step of a table.
// Pointers, sizes and strides only (no validation, no exceptions, no I/O). The public functions in
// pe/sinusoidal.h and pe/learned.h validate and then call PeRowsKernel / PeSgdKernel. The Highway SIMD path
// (pe_kernels.cc, runtime dispatch) sits behind this boundary; the scalar reference (pe_kernels_scalar.cc)
// stays the definition of correct every fast path is tested against, and stays selectable at run time
// (SetPeKernelPath, or the environment variable POSENC_KERNEL=scalar, shared with the RoPE kernels).
//
// Legend (shapes, row-major, innermost last):
//   n_tokens  rows of the token side: embeddings x / forward output / gradient dout, [n_tokens, d_model]
//   n_rows    rows of the table side: learned wpe or its gradient, or a block of sinusoidal rows
//   d_model   channels per row (any value >= 1; no vector-width or evenness requirement)
// Row t of the token side pairs with row row(t) of the table side: row(t) = rows[t] when rows is non-null,
// else row_offset + t (implicit positions with a KV-cache offset, or a table built for exactly these tokens).
//
// Exactness: every op is element-wise float32 additions (and, for the SGD step, one product then one
// subtraction), each an IEEE-754 operation with one round-to-nearest-even. The SIMD path performs, for every
// output element, the same operations on the same operands in the same order as the scalar reference (no
// reassociation, no fused multiply-add, scatter-add repeats summed in token order), so the two agree bit for
// bit on every target; the tests require exact equality.
#pragma once

#include <cstdint>

namespace posenc::kernels {

/// Which way the rows move.
enum class PeRowsOp {
  kGather,      // tokens[t, :]  = table[row(t), :]   (learned forward; a copy, exact)
  kGatherAdd,   // tokens[t, :] += table[row(t), :]   (x + PE: learned forward-add, sinusoidal add)
  kScatterAdd,  // table[row(t), :] += tokens[t, :]   (learned backward; repeats accumulate in token order)
};

/// One call. Preconditions (checked by the public wrappers, HWY_DASSERT-ed in debug builds): n_tokens >= 0,
/// d_model >= 1, every row(t) in [0, n_rows), strides >= d_model, the token rows distinct and not overlapping
/// the table, pointers non-null when n_tokens > 0. For kGather / kGatherAdd the table is only read; for
/// kScatterAdd the tokens are only read.
struct PeRowsArgs {
  PeRowsOp op;
  int64_t n_tokens;
  int64_t d_model;
  float* tokens;         // [n_tokens, token_stride]: channels [0, d_model) of each row are used
  int64_t token_stride;  // elements between consecutive token rows
  float* table;          // [n_rows, table_stride]
  int64_t table_stride;  // elements between consecutive table rows
  const int64_t* rows;   // [n_tokens] table row of each token, repeats and any order allowed; or nullptr
  int64_t row_offset;    // used when rows == nullptr: row(t) = row_offset + t
};

/// Scalar reference: one element at a time, tokens in order, channels in order. Single-threaded.
/// Shapes/Layout: see PeRowsArgs. Channels [d_model, stride) and memory outside the rows are never touched.
void PeRowsScalar(const PeRowsArgs& args);

/// Highway SIMD path (runtime dispatch over AVX3 / AVX2 / SSE4 / SSSE3 / SCALAR), whatever the selected path.
/// Tests and benchmarks call it directly; the library calls PeRowsKernel.
///
/// Shapes/Layout: as PeRowsScalar; full vectors of unaligned loads/stores along each row, then a scalar tail
/// (exact: the same IEEE addition). Nothing outside channels [0, d_model) of the named rows is read or written.
/// Threads: when the call moves >= kPeParallelMinBytes (and no parallel region is active), OpenMP threads
///          split kGather / kGatherAdd by tokens (each token row is written by one thread) and kScatterAdd by
///          table rows: the piece owning rows [r0, r1) adds every token whose row falls there, in token order, so
///          repeated positions are summed in exactly the scalar order and each piece writes whole rows. (Pieces
///          cover [min row, max row] evenly, so positions crowded into few rows use few threads.) Smaller calls
///          (decode) run on the caller without touching OpenMP.
/// Precision: bit-identical to PeRowsScalar (see the file comment).
void PeRowsSimd(const PeRowsArgs& args);

/// The kernel the library calls: PeRowsSimd, or PeRowsScalar when the scalar path is selected.
void PeRowsKernel(const PeRowsArgs& args);

/// SGD step w[i] = w[i] - learning_rate * g[i] for i in [0, n): the product rounded to float32, then the
/// difference rounded (no fused multiply-add; the library is built with -ffp-contract=off). w and g must not
/// overlap. Scalar reference, single-threaded.
void PeSgdScalar(float* w, const float* g, int64_t n, float learning_rate);

/// The same step with Highway (Mul then Sub, never MulAdd: bit-identical to PeSgdScalar on every target);
/// OpenMP threads over index blocks when 3 * 4 * n bytes >= kPeParallelMinBytes.
void PeSgdSimd(float* w, const float* g, int64_t n, float learning_rate);

/// The step the library calls: PeSgdSimd, or PeSgdScalar when the scalar path is selected.
void PeSgdKernel(float* w, const float* g, int64_t n, float learning_rate);

/// Which implementation PeRowsKernel / PeSgdKernel run.
///   kAuto:   the Highway path, best target the CPU supports, threads for large calls (the default).
///   kScalar: the scalar reference (single-threaded).
/// The initial value comes from the environment variable POSENC_KERNEL, read once on first use:
/// "scalar" selects kScalar; unset, empty, "auto", "simd" or any other value select kAuto.
enum class PeKernelPath { kAuto, kScalar };

/// Selects the path for subsequent calls, process-wide (an atomic; calls already running keep theirs).
/// Overrides POSENC_KERNEL. Independent of SetRopeKernelPath.
void SetPeKernelPath(PeKernelPath path);

/// The path PeRowsKernel / PeSgdKernel currently run.
PeKernelPath GetPeKernelPath();

/// Name of the Highway target PeRowsSimd dispatches to on this CPU ("AVX2", "AVX3", "SSE4", ...); honours
/// hwy::DisableTargets / SetSupportedTargetsForTest.
const char* PeKernelTargetName();

/// Calls moving fewer bytes than this (reads + writes of float32 rows) run on the calling thread; larger
/// ones use OpenMP threads, at most one per kPeParallelMinBytes / 2.
inline constexpr int64_t kPeParallelMinBytes = int64_t{1} << 20;

}  // namespace posenc::kernels
