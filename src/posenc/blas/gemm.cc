#include "posenc/blas/gemm.h"

#include <cblas.h>

#include <fmt/format.h>

#include "posenc/core/errors.h"

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
