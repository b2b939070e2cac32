// Products of Q8_0 weights with activations quantized to Q8_0 blocks, in integers: the product ggml forms for a
// Q8_0 matrix (activations quantized per block of 32, exact int32 block dot products, float32 scaling and sums),
// on the CPU's AVX512-VNNI dot products (vpdpbusd) or a scalar twin with the same result bits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "posenc/core/huge_page_buffer.h"

namespace posenc {

/// Which code Q8Weights::Multiply runs.
enum class Q8Kernel {
  kAuto,    // kVnni where the CPU has it (Q8VnniAvailable), else kScalar
  kScalar,  // portable C++ (the reference the vector kernel is tested against, bit for bit)
  kVnni,    // AVX-512 (F, BW) with VNNI: vpdpbusd over 16 output rows at a time
};

/// True if this CPU runs the kVnni kernel (x86-64 with AVX512F, AVX512BW and AVX512-VNNI, enabled by the OS).
/// Errors: none.
bool Q8VnniAvailable();

/// "vnni (AVX512-VNNI vpdpbusd)" or "scalar" for the kernel kAuto runs on this CPU. Errors: none.
std::string Q8KernelDescription();

/// Activations quantized to Q8_0 as ggml's `quantize_row_q8_0_ref` does, one block of 32 values at a time:
/// d = max_i |x_i| / 127, q_i = roundf(x_i / d) (x_i * (1 / d) in float32, rounded half away from zero; all 0 when
/// d = 0), the block's scale stored as float16 (round to nearest even) and used as the float32 value of that
/// float16. Written into caller-owned buffers by QuantizeQ8Rows.
///
/// Shapes: x [n, in] float32 (row stride ldx >= in), in a multiple of 32; q [n, in] int8 (-127..127; 0 in a block
///         whose float16 scale is 0, which contributes nothing); d [n, in / 32] float32; finite [n] (1 if every value of the row is finite, else 0: such a row
///         is not quantized and its outputs are NaN).
/// Errors: ShapeError if in is not a multiple of 32 or a size is negative; NumericError naming the row, the block
///         and max |x| if a block's scale max |x| / 127 rounds past float16's largest value, 65504 (ggml would
///         store an infinite scale and give non-finite products; here the run stops and says why).
/// Source: ggml-quants.c `quantize_row_q8_0_ref` (block_q8_0: ggml_half d, int8_t qs[32]).
void QuantizeQ8Rows(int64_t n, int64_t in, const float* x, int64_t ldx, int8_t* q, float* d, uint8_t* finite,
                    Q8Kernel kernel = Q8Kernel::kAuto);

/// A Q8_0 weight matrix W [rows, cols] (y = W x; row r is output feature r, cols a multiple of 32) repacked for
/// integer dot products: panels of 16 rows, for each block of 32 columns the 16 rows' codes (plus 128, as unsigned
/// bytes) interleaved by 4 bytes, then their float16 scales as float32. 36 bytes per 32 weights (the file's Q8_0
/// holds 34). Move-only.
class Q8Weights {
 public:
  static constexpr int64_t kPanelRows = 16;   // output rows per panel (one AVX-512 register of int32 sums)
  static constexpr int64_t kBlock = 32;       // Q8_0 block size (ggml's QK8_0)

  /// Repacks `rows` rows of Q8_0 data at `w` (row r is cols / 32 blocks of 34 bytes at w + r * cols / 32 * 34: a
  /// little-endian float16 scale, then 32 int8 codes; any alignment).
  /// Errors: ShapeError if rows or cols is negative or cols is not a multiple of 32; ConfigError naming the row
  ///   and block if a scale is not finite.
  Q8Weights(int64_t rows, int64_t cols, const void* w);
  ~Q8Weights();
  Q8Weights(Q8Weights&&) noexcept;
  Q8Weights& operator=(Q8Weights&&) noexcept;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  /// Bytes of the packed weights.
  int64_t bytes() const;

  /// y = Q8(x) W^T + beta * y for n rows of activations.
  ///
  /// Shapes:    x [n, cols] (row stride ldx >= cols), y [n, rows] (row stride ldy >= rows), row-major float32;
  ///            y must not overlap x.
  /// Semantics: each row of x is quantized per block as QuantizeQ8Rows; then for output (t, r)
  ///            p = sum over blocks b, in block order, of fma(float(s_b), dw_b * dx_b, p) from p = 0, where
  ///            s_b = sum_k qx_k qw_k (exact int32) and dw_b * dx_b is the float32 product of the two scales;
  ///            y = beta == 0 ? p : fma(beta, y, p). A row of x holding a NaN or infinity gives NaN outputs.
  /// Precision: p is within gamma_B sum_b |dw_b dx_b s_b| of the exact sum of its B = cols / 32 terms (one rounding
  ///            per fma); against the unquantized product,
  ///            |p - sum_c x_c w_c| <= sum_b (d_b (1/2 + 2^-14) + 127 |dx_b - d_b|) sum_{c in b} |w_c|
  ///                                   + gamma_{B+1} sum_b |dw_b dx_b s_b|,
  ///            d_b = max_{c in b} |x_c| / 127 the exact scale and dx_b its float16 value: half a step per value
  ///            (2^-14 covers float32's rounding of the scale, its reciprocal and x / d), the float16 rounding of
  ///            the scale applied to |q| <= 127, the float32 scale products and sums; gamma_m = m 2^-24 /
  ///            (1 - m 2^-24) (Higham, Sec. 3.1).
  /// Threads:   up to `threads` OpenMP threads over panels of 16 outputs (0 = OpenMP's default; 1 or inside a
  ///            parallel region: the calling thread); every output is formed by one thread in one order, so the
  ///            result does not depend on the thread count. kScalar and kVnni give the same bits.
  /// Errors:    ShapeError for negative n or short strides; ConfigError if kVnni is asked for on a CPU without it;
///            NumericError as QuantizeQ8Rows.
  /// Source:    ggml's `ggml_vec_dot_q8_0_q8_0` (the vec_dot of a Q8_0 matrix with Q8_0-quantized activations,
  ///            what llama.cpp runs for ggml_mul_mat on Q8_0 weights).
  void Multiply(int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy, float beta = 0.0f, int threads = 0,
                Q8Kernel kernel = Q8Kernel::kAuto) const;

 private:
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  int64_t n_panels_ = 0;
  HugePageBuffer storage_;   // the packed panels
  uint8_t* base_ = nullptr;  // storage_.data(): [n_panels][cols / 32][640 bytes], 2 MiB aligned
};

}  // namespace posenc
