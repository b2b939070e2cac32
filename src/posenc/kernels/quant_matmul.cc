// QuantMatmul: validation, the choice between the panel and the direct path, and OpenMP threading over the
// Highway kernels of quant_dot.h and OpenBLAS sgemm.
#include "posenc/kernels/quant_matmul.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/core/memory.h"
#include "posenc/core/threads.h"
#include "posenc/kernels/dequant.h"
#include "posenc/kernels/quant_dot.h"

namespace posenc {
namespace {

// Floats of one decoded panel: 1 MiB. sgemm packs the panel into its own blocks, so the panel need not stay in
// L2; larger panels mean fewer sgemm calls, each of which packs X again.
constexpr int64_t kPanelFloats = int64_t{1} << 18;
// Weight rows per task of the direct path: enough work per task to amortise OpenMP's scheduling.
constexpr int64_t kDirectRowsPerTask = 32;
// Multiply-adds per thread below which more threads cost more than they save: 2^20 take ~30-100 us on one core,
// an OpenMP fork and join several us on an idle machine and far more on a busy one (a 768 x 256 decode product,
// 0.2 M multiply-adds, is ~10 us on one thread).
constexpr int64_t kMinMacsPerThread = int64_t{1} << 20;

// Threads worth starting for n x out x in multiply-adds: at most `threads`, at least 1.
int UsefulThreads(int threads, int64_t n, int64_t out, int64_t in) {
  const int64_t macs = SaturatingMul(SaturatingMul(n, out), in);
  return static_cast<int>(std::clamp<int64_t>(macs / kMinMacsPerThread, 1, threads));
}
// Largest n the direct path serves under kAuto: where it stops being faster than the panel path on the
// 32000 x 256 shape, one thread, AVX3 (BENCHMARKS.md, "Quantized matrix products"); between n = 8 and 16 the two
// are within 15% of each other. Types with a cheap decode (whole bytes, nibbles or 2-bit codes, one scale per
// 16-32 values) keep it longer than those with a min per block, the K-quants with packed 6-bit scales and mins
// or a fifth / third bit plane, and F32 (4 bytes per weight to stream).
int64_t DirectMaxRows(GgmlType type) {
  switch (type) {
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ2_K: return 16;
    case GgmlType::kF32:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_1:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K: return 8;
    default: return 4;  // Q5_K
  }
}

// The checks QuantMatmul and DequantizeMatrix share; returns the bytes of one weight row.
int64_t CheckWeights(const char* fn, GgmlType type, const void* w, int64_t out, int64_t in) {
  const GgmlTypeTraits* traits = FindGgmlType(static_cast<uint32_t>(type));
  if (traits == nullptr) {
    throw ConfigError(fmt::format("{}: weight type id {} is not a ggml type", fn, static_cast<uint32_t>(type)));
  }
  if (!CanDequantize(type)) {
    throw ConfigError(fmt::format("{}: weight type {} is not supported (supported: f32, f16, bf16, q4_0, q4_1, "
                                  "q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl)",
                                  fn, traits->name));
  }
  if (out < 0 || in < 0) throw ShapeError(fmt::format("{}: out and in must be >= 0, got out={} in={}", fn, out, in));
  if (in % traits->block_size != 0) {
    throw ConfigError(fmt::format("{}: in (values per weight row) must be a multiple of the {} block size {}, got {}",
                                  fn, traits->name, traits->block_size, in));
  }
  const int64_t row_bytes = GgmlRowBytes(type, in);
  if (row_bytes < 0 || SaturatingMul(row_bytes, out) == INT64_MAX || SaturatingMul(out, in) == INT64_MAX) {
    throw ShapeError(fmt::format("{}: a {} weight matrix of out={} x in={} overflows int64 bytes", fn, traits->name,
                                 out, in));
  }
  if (w == nullptr && out > 0 && in > 0) throw ShapeError(fmt::format("{}: w is null for out={} in={}", fn, out, in));
  return row_bytes;
}

void PanelProduct(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t out, int64_t in, const float* x,
                  int64_t n, float* y, int threads, int64_t panel_rows) {
  panel_rows = std::min(panel_rows, out);
  const int64_t n_panels = (out + panel_rows - 1) / panel_rows;
  const int t = static_cast<int>(std::min<int64_t>(threads, n_panels));
  const bool copy = type != GgmlType::kF32;
  std::vector<float> buffers(copy ? static_cast<size_t>(t) * static_cast<size_t>(panel_rows * in) : 0);
  const OneBlasThread one_blas_thread;
#pragma omp parallel for schedule(dynamic, 1) num_threads(t) if (t > 1)
  for (int64_t p = 0; p < n_panels; ++p) {
    const int64_t o0 = p * panel_rows;
    const int64_t rows = std::min(panel_rows, out - o0);
    const float* panel;
    if (copy) {
      float* buf = buffers.data() + static_cast<size_t>(omp_get_thread_num()) * static_cast<size_t>(panel_rows * in);
      kernels::DequantizeRows(type, w + o0 * row_bytes, row_bytes, rows, in, buf, in);
      panel = buf;
    } else {
      panel = reinterpret_cast<const float*>(w + o0 * row_bytes);
    }
    GemmNT(n, rows, in, x, in, panel, in, y + o0, out);
  }
}

void DirectProduct(GgmlType type, const uint8_t* w, int64_t row_bytes, int64_t out, int64_t in, const float* x,
                   int64_t n, float* y, int threads) {
  const int64_t n_tasks = (out + kDirectRowsPerTask - 1) / kDirectRowsPerTask;
  const int t = static_cast<int>(std::min<int64_t>(threads, n_tasks));
#pragma omp parallel for schedule(dynamic, 1) num_threads(t) if (t > 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t o0 = task * kDirectRowsPerTask;
    const int64_t rows = std::min(kDirectRowsPerTask, out - o0);
    kernels::QuantDotRows(type, w + o0 * row_bytes, row_bytes, rows, in, x, n, y + o0, out);
  }
}

}  // namespace

int64_t QuantMatmulPanelRows(int64_t in) {
  return std::clamp<int64_t>(kPanelFloats / std::max<int64_t>(in, 1), 16, 4096);
}

std::string_view QuantMatmulPathName(QuantMatmulPath path) {
  switch (path) {
    case QuantMatmulPath::kAuto: return "auto";
    case QuantMatmulPath::kPanel: return "panel";
    case QuantMatmulPath::kDirect: return "direct";
  }
  return "unknown";
}

QuantMatmulPath ChooseQuantMatmulPath(GgmlType type, int64_t n) {
  return n <= DirectMaxRows(type) ? QuantMatmulPath::kDirect : QuantMatmulPath::kPanel;
}

void QuantMatmul(GgmlType type, const void* w, int64_t out, int64_t in, const float* x, int64_t n, float* y,
                 const QuantMatmulOptions& options) {
  const int64_t row_bytes = CheckWeights("QuantMatmul", type, w, out, in);
  const int threads = ResolveThreads(options.threads, "QuantMatmulOptions.threads");
  if (n < 0) throw ShapeError(fmt::format("QuantMatmul: n (activation rows) must be >= 0, got {}", n));
  if (options.panel_rows < 0) {
    throw ConfigError(fmt::format("QuantMatmulOptions.panel_rows must be >= 0 (0 = automatic), got {}",
                                  options.panel_rows));
  }
  if (SaturatingMul(n, std::max(in, out)) == INT64_MAX) {
    throw ShapeError(fmt::format("QuantMatmul: n={} rows of in={} / out={} floats overflow int64", n, in, out));
  }
  if (n == 0 || out == 0) return;
  if (y == nullptr || (x == nullptr && in > 0)) {
    throw ShapeError(fmt::format("QuantMatmul: x or y is null for n={} in={} out={}", n, in, out));
  }
  if (in == 0) {
    std::fill(y, y + n * out, 0.0f);
    return;
  }
  const int useful_threads = UsefulThreads(threads, n, out, in);
  QuantMatmulPath path = options.path;
  if (path == QuantMatmulPath::kAuto) path = ChooseQuantMatmulPath(type, n);
  const auto* wb = static_cast<const uint8_t*>(w);
  if (path == QuantMatmulPath::kDirect) {
    DirectProduct(type, wb, row_bytes, out, in, x, n, y, useful_threads);
  } else {
    PanelProduct(type, wb, row_bytes, out, in, x, n, y, useful_threads,
                 options.panel_rows > 0 ? options.panel_rows : QuantMatmulPanelRows(in));
  }
}

int64_t QuantMatmulScratchBytes(GgmlType type, int64_t n, int64_t out, int64_t in, int threads,
                                QuantMatmulPath path) {
  const int t = ResolveThreads(threads, "threads");
  if (path == QuantMatmulPath::kAuto) path = ChooseQuantMatmulPath(type, n);
  if (path == QuantMatmulPath::kDirect || type == GgmlType::kF32 || in <= 0 || out <= 0 || n <= 0) return 0;
  const int64_t panel_rows = std::min(QuantMatmulPanelRows(in), out);
  const int64_t panels = (out + panel_rows - 1) / panel_rows;
  const int64_t buffers = std::min<int64_t>(UsefulThreads(t, n, out, in), panels);
  return SaturatingMul(SaturatingMul(buffers, panel_rows), SaturatingMul(in, 4));
}

void DequantizeMatrix(GgmlType type, const void* w, int64_t out, int64_t in, float* dst, int threads) {
  const int64_t row_bytes = CheckWeights("DequantizeMatrix", type, w, out, in);
  const int t = ResolveThreads(threads, "threads");
  if (out == 0 || in == 0) return;
  if (dst == nullptr) throw ShapeError(fmt::format("DequantizeMatrix: dst is null for out={} in={}", out, in));
  const auto* wb = static_cast<const uint8_t*>(w);
  const int64_t n_tasks = (out + kDirectRowsPerTask - 1) / kDirectRowsPerTask;
#pragma omp parallel for schedule(static) num_threads(t) if (t > 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t o0 = task * kDirectRowsPerTask;
    const int64_t rows = std::min(kDirectRowsPerTask, out - o0);
    kernels::DequantizeRows(type, wb + o0 * row_bytes, row_bytes, rows, in, dst + o0 * in, in);
  }
}

}  // namespace posenc
