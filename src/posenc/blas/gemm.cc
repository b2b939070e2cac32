#include "posenc/blas/gemm.h"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include <fmt/format.h>

#include "posenc/core/errors.h"
#include "posenc/core/memory.h"

namespace posenc {

namespace {

// The BLAS call for one element type: cblas_sgemm for float, cblas_dgemm for double.
void Call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const float* a, int lda, const float* b,
          int ldb, float* c, int ldc, float beta) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc);
}
void Call(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n, int k, const double* a, int lda, const double* b,
          int ldb, double* c, int ldc, double beta) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, 1.0, a, lda, b, ldb, beta, c, ldc);
}

// C[m, n] = op(A) op(B) + beta C, row-major: op(A) is [m, k] (stored [k, m] when trans_a), op(B) is [k, n]
// (stored [n, k] when trans_b). Checks the sizes and strides, then calls BLAS.
template <typename T>
void Gemm(const char* name, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const T* a, int64_t lda,
          const T* b, int64_t ldb, T* c, int64_t ldc, T beta) {
  if (m < 0 || n < 0 || k < 0) throw ShapeError(fmt::format("{}: m, n, k must be >= 0, got {} {} {}", name, m, n, k));
  const int64_t a_row = trans_a ? m : k, b_row = trans_b ? k : n;
  if (lda < a_row || ldb < b_row || ldc < n) {
    throw ShapeError(fmt::format("{}: strides must cover the rows, got lda={} (row {}), ldb={} (row {}), ldc={} "
                                 "(n={})", name, lda, a_row, ldb, b_row, ldc, n));
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS wants strides >= 1; an empty sum leaves beta * C
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T{0} ? T{0} : beta * c[i * ldc + j];
    }
    return;
  }
  Call(trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, static_cast<int>(m),
       static_cast<int>(n), static_cast<int>(k), a, static_cast<int>(lda), b, static_cast<int>(ldb), c,
       static_cast<int>(ldc), beta);
}

}  // namespace

void GemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta) {
  Gemm("GemmNT", false, true, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta) {
  Gemm("GemmNN", false, false, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
void GemmTN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta) {
  Gemm("GemmTN", true, false, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
void GemmNT(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
            int64_t ldc, double beta) {
  Gemm("GemmNT", false, true, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
void GemmNN(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
            int64_t ldc, double beta) {
  Gemm("GemmNN", false, false, m, n, k, a, lda, b, ldb, c, ldc, beta);
}
void GemmTN(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb, double* c,
            int64_t ldc, double beta) {
  Gemm("GemmTN", true, false, m, n, k, a, lda, b, ldb, c, ldc, beta);
}

void MatVec(int64_t n, int64_t k, const float* w, const float* x, float* y, float beta) {
  if (n < 0 || k < 0) throw ShapeError(fmt::format("MatVec: n and k must be >= 0, got {} {}", n, k));
  if (n == 0) return;
  if (k == 0) {
    for (int64_t j = 0; j < n; ++j) y[j] = beta == 0.0f ? 0.0f : beta * y[j];
    return;
  }
  cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(n), static_cast<int>(k), 1.0f, w,
              static_cast<int>(k), x, 1, beta, y, 1);
}

void RequireBlasWorkspace(int threads, std::string_view what, std::string_view fewer) {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
  const int64_t n = std::max(threads, 1);
  const int64_t bytes = SaturatingMul(n, kBlasBufferBytes);
  void* p = ::mmap(nullptr, static_cast<size_t>(bytes), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p != MAP_FAILED) {
    ::munmap(p, static_cast<size_t>(bytes));
    // Now that they fit, let OpenBLAS map them: one small product on each of the `n` threads of a team (the
    // threads the run's own parallel regions reuse), so a later shortage is a failed allocation of the run's
    // own (std::bad_alloc, reported) rather than a hang inside OpenBLAS.
    const int team = static_cast<int>(n);
#pragma omp parallel num_threads(team)
    {
      float a[64 * 64] = {}, b[64 * 64] = {}, c[64 * 64];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 64, 64, 64, 1.0f, a, 64, b, 64, 0.0f, c, 64);
    }
    return;
  }
  int64_t used = 0;
  if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
    long pages = 0;
    if (std::fscanf(f, "%ld", &pages) == 1) used = static_cast<int64_t>(pages) * ::sysconf(_SC_PAGESIZE);
    std::fclose(f);
  }
  throw ConfigError(fmt::format(
      "{} needs {} x {} of OpenBLAS work buffers ({}), more than the address space this process has left: it may "
      "use {} (ulimit -v {}) and uses {} already: raise the limit{}",
      what, n, FormatBytes(static_cast<double>(kBlasBufferBytes)), FormatBytes(static_cast<double>(bytes)),
      FormatBytes(static_cast<double>(rl.rlim_cur)), rl.rlim_cur / 1024,
      used > 0 ? FormatBytes(static_cast<double>(used)) : std::string("an unknown amount"),
      fewer.empty() ? std::string() : fmt::format(", or use fewer threads ({})", fewer)));
}

void SetBlasThreads(int n) {
#ifdef OPENBLAS_VERSION
  openblas_set_num_threads(n < 1 ? 1 : n);
#else
  (void)n;
#endif
}

int BlasThreads() {
#ifdef OPENBLAS_VERSION
  return openblas_get_num_threads();
#else
  return 1;
#endif
}

ScopedBlasThreads::ScopedBlasThreads(int n) : saved_(BlasThreads()), set_(n < 1 ? 1 : n) {
  if (saved_ != set_) SetBlasThreads(set_);
}

ScopedBlasThreads::~ScopedBlasThreads() {
  if (saved_ != set_) SetBlasThreads(saved_);
}

}  // namespace posenc
