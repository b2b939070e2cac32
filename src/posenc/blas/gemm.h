// Row-major float32 matrix products through CBLAS (OpenBLAS). blas/ is the only room that includes cblas.h.
#pragma once

#include <cstdint>
#include <string_view>

namespace posenc {

/// C = A * B^T + beta * C, the "activations times weight matrix" product of a transformer layer.
///
/// Shapes:  a [m, k] (row stride lda >= k), b [n, k] (row stride ldb >= k; a weight stored [out][in] as
///          llama2.c does), c [m, n] (row stride ldc >= n). Row-major, float32; c must not overlap a or b.
/// Layout:  beta = 0 overwrites c (its old contents may be anything, even NaN); beta = 1 accumulates.
/// Errors:  ShapeError if m, n or k is negative or a stride is smaller than the row it skips.
/// Source:  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ...).
void GemmNT(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta = 0.0f);

/// C = A * B + beta * C, the "weights times values" product of attention (P V with V stored [keys, head_dim]).
///
/// Shapes:  a [m, k] (row stride lda >= k), b [k, n] (row stride ldb >= n; e.g. the values of one kv head,
///          ldb = the token stride), c [m, n] (row stride ldc >= n). Row-major, float32; c must not overlap a
///          or b.
/// Layout:  beta = 0 overwrites c (its old contents may be anything, even NaN); beta = 1 accumulates.
/// Errors:  ShapeError if m, n or k is negative or a stride is smaller than the row it skips.
/// Source:  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ...).
void GemmNN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta = 0.0f);

/// C = A^T * B + beta * C, the weight gradient of a linear layer: dW[out, in] += dY[n, out]^T X[n, in].
///
/// Shapes:  a [k, m] (row stride lda >= m; read transposed), b [k, n] (row stride ldb >= n), c [m, n] (row
///          stride ldc >= n). Row-major, float32; c must not overlap a or b.
/// Layout:  beta = 0 overwrites c (its old contents may be anything, even NaN); beta = 1 accumulates.
/// Errors:  ShapeError if m, n or k is negative or a stride is smaller than the row it skips.
/// Source:  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ...).
void GemmTN(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, float beta = 0.0f);

/// Float64 twins of GemmNT, GemmNN and GemmTN (cblas_dgemm): the same shapes, layout, errors and argument
/// order. The training layers use them for their float64 instantiation (gradient checks in float64).
void GemmNT(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, double beta = 0.0);
void GemmNN(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, double beta = 0.0);
void GemmTN(int64_t m, int64_t n, int64_t k, const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, double beta = 0.0);

/// y = W x + beta * y for one vector (a decode step).
///
/// Shapes:  w [n, k] row-major (row stride k), x [k], y [n]; y must not overlap w or x.
/// Errors:  ShapeError if n or k is negative.
/// Source:  cblas_sgemv(CblasRowMajor, CblasNoTrans, ...); llama2.c run.c `matmul`.
void MatVec(int64_t n, int64_t k, const float* w, const float* x, float* y, float beta = 0.0f);

/// Bytes of the work buffer OpenBLAS maps for each thread that calls it (BUFFER_SIZE of its x86-64 build,
/// 32 << 22, plus its alignment page), on the first call from that thread.
inline constexpr int64_t kBlasBufferBytes = (int64_t{32} << 22) + 8192;

/// Proves that `threads` BLAS work buffers (kBlasBufferBytes each) fit in the address space this process has
/// left, before any BLAS call: when an address-space limit (ulimit -v) leaves no room for one, OpenBLAS's
/// allocator retries forever, and the run hangs without a word. Maps the buffers' size as inaccessible,
/// unreserved memory (mmap PROT_NONE, MAP_NORESERVE: it counts against the limit and nothing else) and unmaps
/// it; then lets OpenBLAS map them at once (a small product on each of `threads` OpenMP threads), so that a
/// later shortage is a reported std::bad_alloc. No check, and no cost, when the address space is unlimited.
/// `what` names the run ("eval with 2 threads"), `fewer` how to ask for fewer threads ("`threads`"; empty: no
/// such advice).
/// Errors: ConfigError "<what> needs <n> x 128 MiB of OpenBLAS work buffers ...; this process may use <limit>
///         of address space (ulimit -v ...) and uses <used> already: raise the limit, or use fewer threads
///         (<fewer>)".
void RequireBlasWorkspace(int threads, std::string_view what, std::string_view fewer);

/// Number of threads the BLAS library may use inside one call (OpenBLAS: openblas_set_num_threads). posenc
/// parallelises eval across windows with OpenMP and sets 1 here so the two do not oversubscribe the cores.
/// No effect with a BLAS that has no such control. Errors: none (n < 1 is taken as 1).
void SetBlasThreads(int n);

/// The BLAS library's current thread count (OpenBLAS: openblas_get_num_threads); 1 with a BLAS that has no
/// such control. Lets a caller that sets 1 for its own OpenMP region restore the previous value.
int BlasThreads();

/// Sets the BLAS library to `n` threads for the lifetime of the object, then restores the previous count. Not
/// safe against concurrent changes of the BLAS thread count. Errors: none (n < 1 is taken as 1).
class ScopedBlasThreads {
 public:
  explicit ScopedBlasThreads(int n);
  ~ScopedBlasThreads();
  ScopedBlasThreads(const ScopedBlasThreads&) = delete;
  ScopedBlasThreads& operator=(const ScopedBlasThreads&) = delete;

 private:
  int saved_;
  int set_;
};

/// ScopedBlasThreads(1): GEMMs run inside the caller's own threads.
class OneBlasThread : public ScopedBlasThreads {
 public:
  OneBlasThread() : ScopedBlasThreads(1) {}
};

}  // namespace posenc
