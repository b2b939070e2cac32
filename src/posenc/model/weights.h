// The model's weight matrices and the one product every weight goes through (Linear): float32 rows (from the
// file's mapping or dequantized at load) or the file's own encoding multiplied by QuantMatmul.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/formats/tensor_view.h"

namespace posenc {

class Bf16Weights;
class Q8Weights;

/// How the model keeps its weight matrices.
enum class WeightStorage {
  kAuto,     // kFile for every type but F32 (which is used in place either way)
  kFloat32,  // dequantize every matrix to float32 once at load (4 bytes per weight), then OpenBLAS sgemm
  kFile,     // keep the file's encoding (no copy) and multiply with QuantMatmul (kernels/quant_matmul.h)
};

/// "auto", "f32" or "file". ParseWeightStorage is the inverse; Errors: ConfigError naming the value.
std::string_view WeightStorageName(WeightStorage storage);
WeightStorage ParseWeightStorage(std::string_view name);

/// The arithmetic of the model's weight products (prefill: products of more than one activation row).
enum class ComputePath {
  kF32,   // float32 activations and weights, float32 sums: OpenBLAS sgemm or QuantMatmul (the oracle tests' path)
  kBf16,  // activations and weights rounded to bfloat16, exact products, float32 sums: oneDNN matmul on the
          // CPU's AMX tiles or AVX512-BF16 dot products (blas/bf16_matmul.h)
  kInt8,  // Q8_0 matrices: activations quantized to Q8_0 blocks, exact int32 block sums, float32 scaling and sums,
          // as llama.cpp multiplies them (kernels/q8_matmul.h, AVX512-VNNI); matrices of other types: kF32
  kAuto,  // ResolveMatrixCompute: per matrix the fastest path this CPU has units for
};

/// "f32", "bf16", "int8" or "auto". ParseComputePath is the inverse; Errors: ConfigError naming the value and the
/// choices.
std::string_view ComputePathName(ComputePath path);
ComputePath ParseComputePath(std::string_view name);

/// Checks that this CPU can run `requested` and returns it.
/// Errors: ConfigError if kBf16 is requested and oneDNN has no bf16 matmul on this CPU (it needs AVX-512), or
/// kInt8 and the CPU lacks AVX512-VNNI (Q8VnniAvailable).
ComputePath ResolveComputePath(ComputePath requested);

/// The path one weight matrix of ggml type `type` takes under `requested` on this CPU (never kAuto):
///  - kF32 and kBf16 as given (bf16's bound, every product within ((1 + u)^2 (1 + gamma_in) - 1) sum |x w|, see
///    Bf16Weights::Multiply, holds for every type, since the rounding of the weights is in it);
///  - kInt8: kInt8 for Q8_0 (whose weights it uses exactly), kF32 for other types;
///  - kAuto: kInt8 for Q8_0 where the CPU has AVX512-VNNI but no AMX (there int8 dot products run at twice the
///    rate of bfloat16 ones; AMX's bf16 tiles are faster still), else kBf16 where oneDNN runs bf16 matmuls on
///    bfloat16 hardware (Bf16MatmulHasUnits: AMX or AVX512-BF16), else kF32.
/// Errors: as ResolveComputePath.
ComputePath ResolveMatrixCompute(ComputePath requested, GgmlType type);

/// What the load line says about a path: "f32 (OpenBLAS <core> / QuantMatmul)", "bf16 (oneDNN <impl>)" or
/// "int8 (Q8_0 blocks, <kernel>)", with "auto -> " in front when it was picked by kAuto.
std::string DescribeComputePath(ComputePath requested, ComputePath resolved);

/// One weight matrix W [rows, cols] of y = W x as the model multiplies it. Every weight product of the model
/// goes through Linear(), so the storage of a type changes in one place.
///
/// Storage: float32 rows (`f32` non-null): the file's own bytes for an F32 tensor (used in place from the
/// mapping), or rows dequantized once at load (DequantizeRow) into `owned`; or (`f32` null) the file's encoded
/// rows in `source`, multiplied by QuantMatmul.
struct WeightMatrix {
  int64_t rows = 0;             // out_features
  int64_t cols = 0;             // in_features
  const float* f32 = nullptr;   // [rows, cols], row-major: the mapping or owned.data(); null: use `source`
  std::vector<float> owned;     // [rows, cols] when dequantized; empty otherwise
  TensorView source;            // the tensor as stored in the file
  std::shared_ptr<const Bf16Weights> bf16;  // compute bf16: W packed in bfloat16 (a BF16 tensor in place); else null
  std::shared_ptr<const Q8Weights> q8;      // compute int8 (Q8_0 W): the codes repacked for dot products; else null

  WeightMatrix() = default;
  WeightMatrix(WeightMatrix&&) noexcept;  // moving keeps owned's buffer, so f32 stays valid
  WeightMatrix& operator=(WeightMatrix&&) noexcept;
  ~WeightMatrix();
  WeightMatrix(const WeightMatrix&) = delete;  // a copy would point f32 at the original's rows
  WeightMatrix& operator=(const WeightMatrix&) = delete;

  /// Row r as float32 into dst [cols] (a copy from f32, or DequantizeRow of the file's row).
  void Row(int64_t r, float* dst) const;
};

/// y = x W^T + beta * y for n rows of activations: y[t, r] = sum_c x[t, c] * W[r, c].
///
/// Shapes:  x [n, w.cols] (row stride ldx >= w.cols), y [n, w.rows] (row stride ldy >= w.rows); row-major
///          float32; y must not overlap x. File-encoded weights need contiguous rows (ldx = cols, ldy = rows).
/// Layout:  beta = 0 overwrites y; beta = 1 accumulates (the residual stream).
/// Errors:  ShapeError as GemmNT / MatVec (negative sizes, short strides), or if a file-encoded matrix is given
///          strided rows; as QuantMatmul.
/// Threads: inside an OpenMP parallel region (eval's windows) file-encoded products run on the calling thread.
/// Source:  float32: cblas_sgemm (n > 1) or cblas_sgemv (n == 1) through blas/gemm.h; file-encoded: QuantMatmul
///          (the product of the DequantizeRow values, as ggml_mul_mat without quantizing activations).
///          With w.bf16 set and n >= kBf16MinRows: Bf16Weights::Multiply (bf16 activations and weights, float32
///          sums; its precision bound); with w.q8 set and n >= kBf16MinRows: Q8Weights::Multiply (Q8_0
///          activations, its bound); fewer rows (decode) take the float32 path above.
inline constexpr int64_t kBf16MinRows = 2;
void Linear(const WeightMatrix& w, int64_t n, const float* x, int64_t ldx, float* y, int64_t ldy,
            float beta = 0.0f);

/// A norm's weights as float32: RMSNorm w, LayerNorm w and b. Empty when the block has no such norm.
struct NormWeights {
  std::vector<float> w;  // [width]; (1 + w) already formed for Hugging Face Gemma norms
  std::vector<float> b;  // [width] (LayerNorm) or empty
  bool present() const { return !w.empty(); }
};

/// The weights of one block (see ModelConfig for which parts a model has). Matrices [out, in].
struct LayerWeights {
  NormWeights attn_norm;       // [dim]
  WeightMatrix wq;             // [q_dim, dim]; rows in the config's rope_layout pair order
  WeightMatrix wk;             // [kv_dim, dim]
  WeightMatrix wv;             // [kv_dim, dim]
  std::vector<float> bq;       // [q_dim] or empty (no bias)
  std::vector<float> bk;       // [kv_dim] or empty
  std::vector<float> bv;       // [kv_dim] or empty
  NormWeights q_norm, k_norm;  // [head_dim] (per head) or [q_dim] / [kv_dim] (whole), or empty
  WeightMatrix wo;             // [dim, q_dim]
  std::vector<float> bo;       // [dim] or empty
  NormWeights attn_post_norm;  // [dim] or empty
  NormWeights ffn_norm;        // [dim] or empty
  WeightMatrix w_gate;         // [hidden_dim, dim]; rows == 0 when the feed-forward is not gated
  WeightMatrix w_up;           // [hidden_dim, dim]
  std::vector<float> b_up;     // [hidden_dim] or empty
  WeightMatrix w_down;         // [dim, hidden_dim]
  std::vector<float> b_down;   // [dim] or empty
  NormWeights ffn_post_norm;   // [dim] or empty
};

/// Every weight of the model.
struct TransformerWeights {
  WeightMatrix token_embd;           // [vocab_size, dim]: rows gathered per token; the classifier when tied
  WeightMatrix position_embd;        // [n_positions, dim]: learned absolute positions; rows == 0 when none
  NormWeights output_norm;           // [dim]
  WeightMatrix output;               // [vocab_size, dim]: the classifier; empty (rows = 0) when tied
  std::vector<LayerWeights> layers;  // [n_layers]
};

/// The load line's compute text for a loaded model: DescribeComputePath of the path its multiplied matrices took
/// or, when they took different ones, each path with its count of matrices ("auto -> int8 (...) for 154 matrices,
/// f32 (...) for 1"). Errors: none.
std::string DescribeCompute(ComputePath requested, const TransformerWeights& weights);

/// The paths the multiplied matrices of a loaded model took, by name, in the order int8, bf16, f32, joined by "+"
/// ("int8", "bf16", "f32", "int8+f32"): what decides a run's arithmetic, without the kernels' names (which differ
/// between machines for the same arithmetic path). Errors: none.
std::string ComputeKinds(const TransformerWeights& weights);

/// A WeightMatrix over tensor `t` of the file `source` (named in errors): F32 tensors are used in place from the
/// mapping, others converted to float32 once (kFloat32) or kept encoded (kAuto, kFile); every weight is checked
/// finite (encoded ones row by row). compute, resolved for the tensor's type with ResolveMatrixCompute: kBf16 also
/// packs a bfloat16 copy (w.bf16, 2 bytes per weight; a BF16 tensor is used in place from the mapping, no copy),
/// kInt8 a repacked copy of the Q8_0 codes (w.q8, 1.125 bytes per weight) for the prefill products.
/// Errors: IoError naming the file, the tensor, the element [row, column] and the value if a weight is NaN or
///   infinite.
/// Errors also: as ResolveComputePath, Bf16Weights and Q8Weights.
WeightMatrix MakeWeightMatrix(const TensorView& t, const std::string& source, WeightStorage storage,
                              ComputePath compute = ComputePath::kF32);

/// The tensor's values as float32 [n_elements] (norm weights, biases), checked finite.
/// Errors: IoError as MakeWeightMatrix.
std::vector<float> MakeWeightVector(const TensorView& t, const std::string& source);

}  // namespace posenc
