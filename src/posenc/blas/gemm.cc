#include "posenc/blas/gemm.h"

#include <cblas.h>

#include <fmt/format.h>

#include "posenc/core/errors.h"

namespace posenc {

void GemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta) {
  if (m < 0 || n < 0 || k < 0) throw ShapeError(fmt::format("GemmNT: m, n, k must be >= 0, got {} {} {}", m, n, k));
  if (lda < k || ldb < k || ldc < n) {
    throw ShapeError(fmt::format("GemmNT: strides must cover the rows, got lda={} ldb={} (k={}), ldc={} (n={})",
                                 lda, ldb, k, ldc, n));
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS wants strides >= 1; an empty sum leaves beta * C
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
}

void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta) {
  if (m < 0 || n < 0 || k < 0) throw ShapeError(fmt::format("GemmNN: m, n, k must be >= 0, got {} {} {}", m, n, k));
  if (lda < k || ldb < n || ldc < n) {
    throw ShapeError(fmt::format("GemmNN: strides must cover the rows, got lda={} (k={}), ldb={} ldc={} (n={})",
                                 lda, k, ldb, ldc, n));
  }
  if (m == 0 || n == 0) return;
  if (k == 0) {  // BLAS wants strides >= 1; an empty sum leaves beta * C
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
    }
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
              static_cast<int>(ldc));
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

OneBlasThread::OneBlasThread() : saved_(BlasThreads()) {
  if (saved_ != 1) SetBlasThreads(1);
}

OneBlasThread::~OneBlasThread() {
  if (saved_ != 1) SetBlasThreads(saved_);
}

}  // namespace posenc
