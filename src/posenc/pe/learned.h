// Learned absolute positional embedding: a trainable table with one row per position (GPT-2's `wpe`).
//
// Legend (shapes, row-major, innermost last):
//   max_seq_len  rows of the table: positions 0 .. max_seq_len-1 (tokens)
//   d_model      channels of one row (GPT-2 "C")
//   n_tokens     rows of an activation / gradient matrix [n_tokens, d_model] (llm.c's B*T flattened)
//
// Forward gathers rows, backward scatter-adds into the table gradient, as llm.c `encoder_forward` /
// `encoder_backward` do for `wpe` (karpathy/llm.c, train_gpt2.c). Positions are either explicit
// (position_ids[t]) or implicit with a KV-cache offset (position of token t = offset + t, offset = number of
// tokens already in the cache: decoding must continue at the cache length (a bug seen in other libraries), and
// single-token inputs still get their row). A position outside [0, max_seq_len) is a RangeError: never
// clamped, never wrapped, and nothing is written when it is thrown.
//
// Kernels: after validation, every forward, backward and SGD call runs kernels::PeRowsKernel / PeSgdKernel
// (posenc/kernels/pe_kernels.h): Highway SIMD with runtime dispatch, OpenMP threads for calls moving >= 1 MiB
// (gathers split by tokens, the scatter-add by table rows so repeated positions still accumulate in token
// order), or the scalar reference when POSENC_KERNEL=scalar / SetPeKernelPath(kScalar). Both paths give the
// same bits: these are element-wise float32 additions (and, for SGD, one product and one subtraction)
// performed in the same order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace posenc {

/// A learned positional-embedding table, wpe[max_seq_len, d_model] (float32, row-major, contiguous).
/// Owns its storage; copying copies the table.
class LearnedPositionalEmbedding {
 public:
  /// A zero-filled table.
  /// Errors: ConfigError if max_seq_len < 1 or d_model < 1 (message names the field and value), or if
  ///         max_seq_len * d_model * 4 bytes does not fit in int64.
  LearnedPositionalEmbedding(int64_t max_seq_len, int64_t d_model);

  int64_t max_seq_len() const { return max_seq_len_; }  // rows (tokens)
  int64_t d_model() const { return d_model_; }          // channels per row

  /// The whole table, [max_seq_len, d_model] row-major; row p starts at element p * d_model.
  std::span<float> table() { return table_; }
  std::span<const float> table() const { return table_; }

  /// Row p of the table, [d_model].
  /// Errors: RangeError if position < 0 or >= max_seq_len ("position = 17 is outside the learned table
  ///         [0, max_seq_len = 16)").
  std::span<const float> Row(int64_t position) const;

 private:
  int64_t max_seq_len_;
  int64_t d_model_;
  std::vector<float> table_;  // [max_seq_len, d_model]
};

/// Overwrites the table with seeded normal(0, stddev) values (GPT-2 init: stddev 0.02).
///
/// Shapes:  fills pe.table() [max_seq_len, d_model] in row-major order.
/// Generator (deterministic, documented so that one seed gives one table everywhere):
///          g = std::mt19937_64(seed) (its output sequence is fixed by the C++ standard). For each pair of
///          consecutive elements (2j, 2j+1) in row-major order, draw a = g(), then b = g(), and set
///            u1 = ((a >> 11) + 1) * 2^-53            in (0, 1]
///            u2 = (b >> 11) * 2^-53                  in [0, 1)
///            r  = sqrt(-2 * log(u1))
///            element 2j   = float32(stddev * r * cos(2 * pi * u2))
///            element 2j+1 = float32(stddev * r * sin(2 * pi * u2))      (dropped if the count is odd)
///          (Box-Muller, computed in double). std::normal_distribution is not used: its algorithm differs
///          between standard libraries. The only platform dependence left is libm's last-bit rounding of
///          log/sqrt/cos/sin in double, which the final float32 rounding hides except in rare near-ties.
/// Units:   values dimensionless; stddev is the standard deviation of each element.
/// Errors:  ConfigError if stddev is not finite or < 0 (message names stddev and its value).
/// Source:  GPT-2 initialisation normal(0, 0.02) (Radford et al. 2019; nanoGPT `_init_weights`).
void InitLearnedPeNormal(LearnedPositionalEmbedding& pe, uint64_t seed, double stddev = 0.02);

/// Forward, explicit positions: out[t, :] = wpe[position_ids[t], :].
///
/// Shapes:  position_ids[n_tokens] (int64, repeats allowed); out[n_tokens, d_model], float32, row-major,
///          contiguous; overwritten (not accumulated). out must not alias the table.
/// Units:   positions in tokens, 0-based.
/// Errors:  RangeError if some position_ids[t] < 0 or >= max_seq_len: the message names t, the position
///          and the limit ("position_ids[3] = 17 is outside the learned table [0, max_seq_len = 16)");
///          ShapeError if out.size() != n_tokens * d_model. Nothing is written when it throws.
/// Source:  karpathy/llm.c `encoder_forward` (the wpe half: out = wte[token] + wpe[t]).
void LearnedPeForward(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                      std::span<float> out);

/// Forward, implicit positions with a KV-cache offset: out[t, :] = wpe[offset + t, :] for t in [0, n_tokens).
/// offset is the number of tokens already processed (the KV-cache length): prefill uses offset 0,
/// each decode step uses the current cache length, and n_tokens = 1 still gathers row `offset`, not row 0.
///
/// Shapes:  out[n_tokens, d_model], float32, row-major, contiguous; overwritten.
/// Units:   offset and positions in tokens, 0-based.
/// Errors:  RangeError if offset < 0 or offset + n_tokens > max_seq_len: the message names the first bad
///          position, offset, n_tokens and the limit; ShapeError if n_tokens < 0 or
///          out.size() != n_tokens * d_model. Nothing is written when it throws.
/// Source:  llm.c `encoder_forward` (offset 0); offset semantics as mlx-lm's fix in PR #93.
void LearnedPeForward(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens, std::span<float> out);

/// Forward-add, explicit positions: x[t, :] += wpe[position_ids[t], :] (token embeddings + positions).
///
/// Shapes:  x[n_tokens, d_model], float32, row-major, contiguous, modified in place (accumulates);
///          position_ids[n_tokens].
/// Errors:  as LearnedPeForward (explicit positions), with x in place of out. x is untouched on error.
/// Backward: dL/dx_in = dL/dx_out (identity) and dL/dwpe by LearnedPeBackward with the same positions.
/// Source:  llm.c `encoder_forward`.
void LearnedPeForwardAdd(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                         std::span<float> x);

/// Forward-add, implicit positions with a KV-cache offset: x[t, :] += wpe[offset + t, :].
///
/// Shapes, errors and backward as the two functions above (offset rules as the offset LearnedPeForward).
void LearnedPeForwardAdd(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens, std::span<float> x);

/// Forward-add on a caller-owned table (e.g. a slice of a model's flat parameter buffer), implicit positions:
/// x[t, :] += table[offset + t, :]. Behaves as the LearnedPositionalEmbedding overload.
///
/// Shapes:  table [max_seq_len, d_model] row-major contiguous, max_seq_len = table.size() / d_model;
///          x [n_tokens, d_model], modified in place.
/// Errors:  ConfigError if d_model < 1; ShapeError if table.size() is not a positive multiple of d_model or
///          x.size() != n_tokens * d_model; RangeError as the offset LearnedPeForward. x is untouched on error.
void LearnedPeForwardAdd(std::span<const float> table, int64_t d_model, int64_t offset, int64_t n_tokens,
                         std::span<float> x);

/// Backward, explicit positions: dtable[position_ids[t], :] += dout[t, :] for every t (scatter-add).
/// Repeated positions accumulate; the function never zeroes dtable, so callers zero it before the first
/// backward of a step (as llm.c's `gpt2_zero_grad`) and may accumulate over micro-batches.
///
/// Shapes:  position_ids[n_tokens]; dout[n_tokens, d_model] = dL/d(out) of the forward (or dL/dx of the
///          forward-add); dtable[max_seq_len, d_model] = dL/dwpe, float32, row-major, accumulated into.
///          pe supplies max_seq_len and d_model only (the gather is linear: its values are not read).
/// Errors:  RangeError as LearnedPeForward; ShapeError if dout.size() != n_tokens * d_model or
///          dtable.size() != max_seq_len * d_model. dtable is untouched when it throws.
/// Source:  karpathy/llm.c `encoder_backward` (`dwpe[t] += dout[b, t]`).
void LearnedPeBackward(const LearnedPositionalEmbedding& pe, std::span<const int64_t> position_ids,
                       std::span<const float> dout, std::span<float> dtable);

/// Backward, implicit positions with a KV-cache offset: dtable[offset + t, :] += dout[t, :].
/// Shapes, errors and accumulation as the explicit-position LearnedPeBackward (offset rules as the offset
/// LearnedPeForward).
void LearnedPeBackward(const LearnedPositionalEmbedding& pe, int64_t offset, int64_t n_tokens,
                       std::span<const float> dout, std::span<float> dtable);

/// Backward on a caller-owned gradient table, implicit positions: dtable[offset + t, :] += dout[t, :].
/// Shapes:  dtable [max_seq_len, d_model], max_seq_len = dtable.size() / d_model; dout [n_tokens, d_model].
/// Errors:  as the forward-add on a caller-owned table, with dtable in place of table. Accumulates (+=).
void LearnedPeBackward(int64_t d_model, int64_t offset, int64_t n_tokens, std::span<const float> dout,
                       std::span<float> dtable);

/// Plain SGD step: wpe -= learning_rate * dtable (float32, element-wise: the product rounded, then the
/// difference; no fused multiply-add). dtable is not modified.
///
/// Shapes:  dtable[max_seq_len, d_model].
/// Errors:  ShapeError if dtable.size() != max_seq_len * d_model; ConfigError if learning_rate is not
///          finite. The table is untouched when it throws.
void LearnedPeSgdStep(LearnedPositionalEmbedding& pe, std::span<const float> dtable, float learning_rate);

/// File format of SaveLearnedPe / LoadLearnedPe (version 1). Every integer and float is little-endian,
/// whatever the host; there is no padding:
///   offset  size  field
///        0     8  magic, the ASCII bytes "posencPE"
///        8     4  version, uint32 = 1
///       12     4  dtype, uint32 = 0 (float32; the only value)
///       16     8  max_seq_len, int64 (>= 1)
///       24     8  d_model, int64 (>= 1)
///       32  4*N  table, N = max_seq_len * d_model float32 values, row-major [max_seq_len, d_model]
/// The file size is exactly 32 + 4 * max_seq_len * d_model bytes.
inline constexpr char kLearnedPeMagic[8] = {'p', 'o', 's', 'e', 'n', 'c', 'P', 'E'};
inline constexpr uint32_t kLearnedPeVersion = 1;
inline constexpr int64_t kLearnedPeHeaderBytes = 32;

/// Writes the table in the format above (bit-exact float32 values; LoadLearnedPe round-trips them).
/// Errors:  IoError if the file cannot be opened or written (message names the path).
void SaveLearnedPe(const LearnedPositionalEmbedding& pe, const std::filesystem::path& path);

/// Reads a table written by SaveLearnedPe.
/// Errors:  IoError, naming the path and the expected vs actual value, if the file cannot be opened, is
///          shorter than the header, has another magic, version or dtype, has max_seq_len or d_model < 1,
///          is not exactly 32 + 4 * max_seq_len * d_model bytes long (truncated or with trailing bytes;
///          the message gives both sizes), or holds a NaN or infinite value (message names its row and
///          channel).
LearnedPositionalEmbedding LoadLearnedPe(const std::filesystem::path& path);

}  // namespace posenc
