#include "posenc/model/weights.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "posenc/blas/bf16_matmul.h"
#include "posenc/blas/blas_core.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/kernels/dequant.h"
#include "posenc/kernels/finite_kernels.h"
#include "posenc/kernels/q8_matmul.h"
#include "posenc/kernels/quant_matmul.h"

namespace posenc {
namespace {

// Refuses a tensor holding NaN or infinity, naming the file, the tensor, the element and the value.
void CheckFiniteWeights(const float* w, int64_t rows, int64_t cols, const TensorView& t, const std::string& src) {
  const int64_t i = kernels::FirstNonFinite(w, rows * cols);
  if (i < 0) return;
  throw IoError(fmt::format("{}: tensor {} holds a non-finite weight: element [{}, {}] (flat index {} of {}) is {}",
                            src, t.name, i / cols, i % cols, i, rows * cols, w[i]));
}

// The tensor's values as float32 [rows, cols] (DequantizeMatrix: DequantizeRow's values bit for bit).
std::vector<float> Dequantize(const TensorView& t) {
  std::vector<float> out(static_cast<size_t>(t.rows() * t.cols()));
  DequantizeMatrix(t.type, t.data, t.rows(), t.cols(), out.data());
  return out;
}

ComputePath PathOf(const WeightMatrix& w) {
  return w.bf16 ? ComputePath::kBf16 : w.q8 ? ComputePath::kInt8 : ComputePath::kF32;
}

// The paths the multiplied matrices took, with their counts, in the order int8, bf16, f32 (paths no matrix took
// left out).
std::vector<std::pair<ComputePath, int64_t>> UsedPaths(const TransformerWeights& weights) {
  std::vector<std::pair<ComputePath, int64_t>> used = {
      {ComputePath::kInt8, 0}, {ComputePath::kBf16, 0}, {ComputePath::kF32, 0}};
  auto add = [&](const WeightMatrix& w) {
    if (w.rows == 0) return;
    for (auto& [path, count] : used) count += path == PathOf(w) ? 1 : 0;
  };
  add(weights.output.rows > 0 ? weights.output : weights.token_embd);
  for (const LayerWeights& l : weights.layers) {
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) add(*w);
  }
  std::erase_if(used, [](const auto& u) { return u.second == 0; });
  return used;
}

}  // namespace

WeightMatrix::WeightMatrix(WeightMatrix&&) noexcept = default;
WeightMatrix& WeightMatrix::operator=(WeightMatrix&&) noexcept = default;
WeightMatrix::~WeightMatrix() = default;

std::string_view ComputePathName(ComputePath path) {
  switch (path) {
    case ComputePath::kF32: return "f32";
    case ComputePath::kBf16: return "bf16";
    case ComputePath::kInt8: return "int8";
    case ComputePath::kAuto: return "auto";
  }
  return "unknown";
}

ComputePath ParseComputePath(std::string_view name) {
  for (ComputePath p : {ComputePath::kF32, ComputePath::kBf16, ComputePath::kInt8, ComputePath::kAuto}) {
    if (ComputePathName(p) == name) return p;
  }
  throw ConfigError(fmt::format("unknown compute path '{}' (expected one of f32, bf16, int8, auto)", name));
}

ComputePath ResolveComputePath(ComputePath requested) {
  if (requested == ComputePath::kBf16 && !Bf16MatmulAvailable()) {
    throw ConfigError(fmt::format("`compute` bf16 needs oneDNN's bf16 matmul, which this CPU lacks ({}; oneDNN "
                                  "2.6 has none below AVX-512): use `compute` f32 or auto", OneDnnDescription()));
  }
  if (requested == ComputePath::kInt8 && !Q8VnniAvailable()) {
    throw ConfigError("`compute` int8 needs AVX512-VNNI (AVX512F, AVX512BW and VNNI), which this CPU lacks: use "
                      "`compute` f32 or auto");
  }
  return requested;
}

ComputePath ResolveMatrixCompute(ComputePath requested, GgmlType type) {
  switch (ResolveComputePath(requested)) {
    case ComputePath::kF32: return ComputePath::kF32;
    case ComputePath::kBf16: return ComputePath::kBf16;
    case ComputePath::kInt8: return type == GgmlType::kQ8_0 ? ComputePath::kInt8 : ComputePath::kF32;
    case ComputePath::kAuto: break;
  }
  if (type == GgmlType::kQ8_0 && Q8VnniAvailable() && !Bf16MatmulHasAmx()) return ComputePath::kInt8;
  return Bf16MatmulHasUnits() ? ComputePath::kBf16 : ComputePath::kF32;
}

std::string DescribeComputePath(ComputePath requested, ComputePath resolved) {
  std::string how;
  switch (resolved) {
    case ComputePath::kBf16:
      how = fmt::format("bf16 (oneDNN {}, {})", Bf16MatmulImplementation(), OneDnnDescription());
      break;
    case ComputePath::kInt8: how = fmt::format("int8 (Q8_0 blocks, {})", Q8KernelDescription()); break;
    default: how = fmt::format("f32 ({} / QuantMatmul)", DescribeBlas()); break;
  }
  return requested == ComputePath::kAuto ? "auto -> " + how : how;
}

std::string ComputeKinds(const TransformerWeights& weights) {
  std::vector<std::string_view> kinds;
  for (const auto& [path, count] : UsedPaths(weights)) kinds.push_back(ComputePathName(path));
  return kinds.empty() ? "f32" : fmt::format("{}", fmt::join(kinds, "+"));
}

std::string DescribeCompute(ComputePath requested, const TransformerWeights& weights) {
  const std::vector<std::pair<ComputePath, int64_t>> used = UsedPaths(weights);
  if (used.size() <= 1) {
    const ComputePath path = used.empty() ? ComputePath::kF32 : used[0].first;
    std::string text = DescribeComputePath(requested, path);
    if (requested == ComputePath::kInt8 && path != ComputePath::kInt8) {
      text += "; no matrix is Q8_0, the only type int8 multiplies";
    }
    return text;
  }
  std::vector<std::string> parts;
  for (const auto& [path, count] : used) {
    parts.push_back(fmt::format("{} for {} matri{}", DescribeComputePath(ComputePath::kF32, path), count,
                                count == 1 ? "x" : "ces"));
  }
  return (requested == ComputePath::kAuto ? "auto -> " : "") + fmt::format("{}", fmt::join(parts, ", "));
}

WeightMatrix MakeWeightMatrix(const TensorView& t, const std::string& src, WeightStorage storage,
                              ComputePath compute) {
  WeightMatrix m;
  m.rows = t.rows();
  m.cols = t.cols();
  m.source = t;
  if (t.type == GgmlType::kF32 && reinterpret_cast<uintptr_t>(t.data) % alignof(float) == 0) {
    m.f32 = static_cast<const float*>(t.data);  // used in place: no copy, no extra resident memory
    CheckFiniteWeights(m.f32, m.rows, m.cols, t, src);
  } else if (storage == WeightStorage::kFloat32) {
    m.owned = Dequantize(t);
    m.f32 = m.owned.data();
    CheckFiniteWeights(m.f32, m.rows, m.cols, t, src);
  } else {  // kept encoded: checked a row at a time (rows on all threads; the first bad row is the one named)
    if (m.rows > 0) {  // DequantizeRow's type and size errors (the same for every row) thrown here, not in the team
      std::vector<float> row(static_cast<size_t>(m.cols));
      DequantizeRow(t.type, t.Row(0), row.data(), m.cols);
    }
    int64_t first_bad = m.rows;
#pragma omp parallel if (!omp_in_parallel() && m.rows * m.cols > (int64_t{1} << 20)) reduction(min : first_bad)
    {
      std::vector<float> row(static_cast<size_t>(m.cols));
#pragma omp for schedule(static)
      for (int64_t r = 0; r < m.rows; ++r) {
        DequantizeRow(t.type, t.Row(r), row.data(), m.cols);
        if (r < first_bad && kernels::FirstNonFinite(row.data(), m.cols) >= 0) first_bad = r;
      }
    }
    if (first_bad < m.rows) {
      std::vector<float> row(static_cast<size_t>(m.cols));
      DequantizeRow(t.type, t.Row(first_bad), row.data(), m.cols);
      const int64_t i = kernels::FirstNonFinite(row.data(), m.cols);
      throw IoError(fmt::format("{}: tensor {} holds a non-finite weight: element [{}, {}] is {}", src, t.name,
                                first_bad, i, row[static_cast<size_t>(i)]));
    }
  }
  switch (ResolveMatrixCompute(compute, t.type)) {
    case ComputePath::kBf16:
      if (t.type == GgmlType::kBF16) {  // the file's bytes, in place
        m.bf16 = std::make_shared<const Bf16Weights>(m.rows, m.cols, t.data);
      } else {
        m.bf16 = std::make_shared<const Bf16Weights>(m.rows, m.cols, [&m](int64_t r, float* dst) { m.Row(r, dst); });
      }
      break;
    case ComputePath::kInt8: m.q8 = std::make_shared<const Q8Weights>(m.rows, m.cols, t.data); break;
    default: break;
  }
  return m;
}

std::vector<float> MakeWeightVector(const TensorView& t, const std::string& src) {
  std::vector<float> v = Dequantize(t);
  CheckFiniteWeights(v.data(), 1, static_cast<int64_t>(v.size()), t, src);
  return v;
}

std::string_view WeightStorageName(WeightStorage storage) {
  switch (storage) {
    case WeightStorage::kAuto: return "auto";
    case WeightStorage::kFloat32: return "f32";
    case WeightStorage::kFile: return "file";
  }
  return "unknown";
}

WeightStorage ParseWeightStorage(std::string_view name) {
  for (WeightStorage s : {WeightStorage::kAuto, WeightStorage::kFloat32, WeightStorage::kFile}) {
    if (WeightStorageName(s) == name) return s;
  }
  throw ConfigError(fmt::format("unknown weight storage '{}' (expected one of auto, f32, file)", name));
}

void WeightMatrix::Row(int64_t r, float* dst) const {
  if (f32 != nullptr) {
    std::copy(f32 + r * cols, f32 + (r + 1) * cols, dst);
  } else {
    DequantizeRow(source.type, source.Row(r), dst, cols);
  }
}

void Linear(const WeightMatrix& w, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy, float beta) {
  if (w.bf16 != nullptr && n >= kBf16MinRows) {
    w.bf16->Multiply(n, x, ldx, y, ldy, beta, omp_in_parallel() ? 1 : 0);
    return;
  }
  if (w.q8 != nullptr && n >= kBf16MinRows) {
    w.q8->Multiply(n, x, ldx, y, ldy, beta, omp_in_parallel() ? 1 : 0);
    return;
  }
  if (w.f32 != nullptr) {
    if (n == 1) {
      MatVec(w.rows, w.cols, w.f32, x, y, beta);
    } else {
      GemmNT(n, w.rows, w.cols, x, ldx, w.f32, w.cols, y, ldy, beta);
    }
    return;
  }
  if (ldx != w.cols || ldy != w.rows) {
    throw ShapeError(fmt::format("Linear on the file-encoded tensor {} needs contiguous rows: ldx = {} (cols {}), "
                                 "ldy = {} (rows {})", w.source.name, ldx, w.cols, ldy, w.rows));
  }
  QuantMatmulOptions options;
  options.threads = omp_in_parallel() ? 1 : 0;
  if (beta == 0.0f) {
    QuantMatmul(w.source.type, w.source.data, w.rows, w.cols, x, n, y, options);
    return;
  }
  thread_local std::vector<float> product;  // [n, rows] before it is added to y
  if (static_cast<int64_t>(product.size()) < n * w.rows) product.resize(static_cast<size_t>(n * w.rows));
  QuantMatmul(w.source.type, w.source.data, w.rows, w.cols, x, n, product.data(), options);
  const int64_t total = n * w.rows;
#pragma omp simd
  for (int64_t i = 0; i < total; ++i) y[i] = beta * y[i] + product[static_cast<size_t>(i)];
}

}  // namespace posenc
