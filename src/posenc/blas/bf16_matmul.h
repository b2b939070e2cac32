// Weight products on the CPU's bfloat16 units (AMX tiles, AVX512-BF16 dot products) through oneDNN's matmul:
// weights rounded to bfloat16 once and packed in the layout oneDNN's kernel wants, activations rounded per call,
// exact products, float32 accumulation. The only place posenc includes dnnl.hpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "posenc/core/huge_page_buffer.h"

namespace posenc {

/// True if oneDNN can create a bfloat16 matmul on this CPU (it needs AVX-512: avx512_core emulates the bf16
/// products with float32 FMAs, avx512_core_bf16 has dot products, avx512_core_amx tiles; oneDNN 2.6 has no bf16
/// matmul below AVX-512). Errors: none.
bool Bf16MatmulAvailable();

/// The implementation oneDNN runs for a prefill-sized bf16 matmul on this CPU, as its verbose mode names it
/// (e.g. "brg:avx512_core_amx_bf16", "brg:avx512_core_bf16", "gemm:jit"); "none" when !Bf16MatmulAvailable().
/// Errors: none.
std::string Bf16MatmulImplementation();

/// True if that implementation uses bfloat16 hardware (AMX or AVX512-BF16 instructions), i.e. the bf16 path is
/// the fast one here, not an emulation. Errors: none.
bool Bf16MatmulHasUnits();

/// True if that implementation runs on AMX tiles (its name holds "amx"). Errors: none.
bool Bf16MatmulHasAmx();

/// oneDNN's version and the instruction set it dispatches to ("oneDNN 2.6.3, avx512_core_amx").
std::string OneDnnDescription();

/// A weight matrix W [rows, cols] (y = W x, row r = output feature r) in bfloat16 for oneDNN's matmul, in blocks
/// of kColumnBlock output rows: either rounded to bfloat16 (round to nearest even, oneDNN's f32 -> bf16 reorder)
/// and packed in the layout oneDNN's kernel wants (2 bytes per weight held), or, for weights that are bfloat16
/// already, read in place from the caller's row-major bytes (no copy; oneDNN copies each block's weights into its
/// layout inside the call, which costs it about 5% of its rate here). Move-only.
class Bf16Weights {
 public:
  /// Output rows per packed block; products split over blocks (the unit of threading), so every output's sum
  /// has one order, whatever the thread count.
  static constexpr int64_t kColumnBlock = 512;

  /// Packs W. `row(r, dst)` writes row r of W as float32 into dst [cols] (rows are fetched one block at a time).
  /// Errors: ConfigError if !Bf16MatmulAvailable(); ShapeError if rows or cols is negative.
  Bf16Weights(int64_t rows, int64_t cols, const std::function<void(int64_t r, float* dst)>& row);

  /// Uses W's bfloat16 values in place (the bit patterns of a BF16 tensor as GGUF and safetensors store it):
  /// row-major [rows, cols], row r at byte offset 2 * r * cols of `bf16` (any alignment). Nothing is copied or
  /// converted: `bf16` must stay readable and unchanged for the object's lifetime (a model's file mapping). The
  /// products are those of the float32 constructor given the same values, within the same bound (bfloat16 ->
  /// float32 is exact, and so is its rounding back; oneDNN may block the sum differently for this layout).
  /// Errors: as the float32 constructor; ShapeError if bf16 is null while rows * cols > 0; ConfigError with
  /// oneDNN's message if it has no matmul for this layout.
  Bf16Weights(int64_t rows, int64_t cols, const void* bf16);
  ~Bf16Weights();
  Bf16Weights(Bf16Weights&&) noexcept;
  Bf16Weights& operator=(Bf16Weights&&) noexcept;

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  /// Bytes this object holds for the packed weights (one HugePageBuffer, each block rounded up to 64 bytes); 0 for
  /// weights used in place.
  int64_t bytes() const;

  /// y = bf16(x) W^T + beta * y for n rows of activations: y[t, r] = sum_c bf16(x[t, c]) * W_bf16[r, c] in float32.
  ///
  /// Shapes:    x [n, cols] (row stride ldx >= cols), y [n, rows] (row stride ldy >= rows), row-major float32;
  ///            y must not overlap x.
  /// Layout:    beta = 0 overwrites y; otherwise y = beta * y + product in float32, once the product is formed
  ///            (a dense per-thread buffer per block: oneDNN 2.6 runs a strided destination on its reference
  ///            kernel only). Entries of y between rows (ldy > rows) are not touched.
  /// Precision: every product of two bfloat16 values is exact in float32; the sum of `cols` of them is a float32
  ///            sum: |y - sum_c x_c w_c| <= ((1 + u)^2 (1 + gamma_cols) - 1) sum_c |x_c w_c| with u = 2^-8 (the
  ///            bfloat16 unit roundoff of x and of W; u = 0 for W when its values are already bfloat16) and
  ///            gamma_m = m 2^-24 / (1 - m 2^-24) (Higham, Sec. 3.1).
  /// Threads:   up to `threads` OpenMP threads over blocks of kColumnBlock outputs (0 = OpenMP's default; 1 or
  ///            inside a parallel region: the calling thread). Each block is one single-threaded oneDNN call, so
  ///            the result does not depend on the thread count.
  /// Errors:    ShapeError for negative n or short strides; ConfigError carrying oneDNN's message and status.
  /// Source:    oneDNN matmul (bf16 src and weights, f32 dst), the product PyTorch runs for a bf16 nn.Linear on
  ///            CPU with float32 accumulation.
  void Multiply(int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy, float beta = 0.0f,
                int threads = 0) const;

 private:
  struct Block;
  // Checks the shape and the CPU, and splits the rows into blocks (first_row, n_rows).
  void LayOutBlocks(int64_t rows, int64_t cols);
  int64_t rows_ = 0;
  int64_t cols_ = 0;
  std::unique_ptr<Block[]> blocks_;
  int64_t n_blocks_ = 0;
  HugePageBuffer packed_;  // every block's packed bytes (empty for weights used in place)
  bool in_place_ = false;
};

}  // namespace posenc
