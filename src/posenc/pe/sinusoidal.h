// Sinusoidal absolute positional encoding (Vaswani et al. 2017, "Attention Is All You Need", Sec. 3.5).
//
// Legend (shapes, row-major, innermost last):
//   d_model      channels of one embedding row; even (sin/cos pairs), >= 2
//   half         d_model / 2, the number of frequency pairs; pair i uses frequency omega_i
//   n_positions  number of position ids asked for (one table row each)
//   n_tokens     rows of an embedding matrix x [n_tokens, d_model]
//
// Math, for pair i in [0, half) and an integer position p (any int64, negative allowed):
//   omega_i = base^(-i / divisor)                                     radians/token
//   divisor = half                  (kHalf: exponent 2i/d_model, the paper)
//           = max(half - 1, 1)      (kHalfMinusOne: fairseq / tensor2tensor / DDPM; clamped so d_model = 2
//                                    gives omega_0 = 1 instead of 0/0 = NaN)
//   sin channel of pair i = sin(p * omega_i),  cos channel of pair i = cos(p * omega_i)
// Layout of one row (SinusoidalLayout):
//   kInterleaved   [sin_0, cos_0, sin_1, cos_1, ..., sin_{half-1}, cos_{half-1}]   (the paper's PE(pos, 2i),
//                  PE(pos, 2i+1); the default)
//   kConcatenated  [sin_0, sin_1, ..., sin_{half-1} | cos_0, cos_1, ..., cos_{half-1}]  (tensor2tensor,
//                  fairseq, diffusers timestep embeddings)
// Relative-position structure: PE(p + k) = M_k * PE(p), where M_k rotates each (sin_i, cos_i) pair by
// k * omega_i and does not depend on p (SinusoidalShiftMatrix); hence PE(p) . PE(q) = sum_i cos((p-q) omega_i).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace posenc {

/// Channel order of one sinusoidal row; see the file comment for the exact permutation.
enum class SinusoidalLayout {
  kInterleaved,   // [sin_0, cos_0, sin_1, cos_1, ...] (Vaswani et al. 2017; default)
  kConcatenated,  // [sin_0 ... sin_{half-1} | cos_0 ... cos_{half-1}]
};

/// Denominator of the frequency exponent: omega_i = base^(-i / divisor).
enum class SinusoidalDivisor {
  kHalf,          // divisor = d_model/2, i.e. exponent 2i/d_model (Vaswani et al. 2017; default)
  kHalfMinusOne,  // divisor = max(d_model/2 - 1, 1) (fairseq, tensor2tensor, DDPM); the slowest pair has
                  // period exactly 2*pi*base. The clamp makes d_model = 2 finite: [sin p, cos p].
};

/// Blueprint of a sinusoidal encoding. Defaults are the paper's.
struct SinusoidalParams {
  int64_t d_model = 0;    // channels per row; even, >= 2
  double base = 10000.0;  // "max_period"; dimensionless, finite, > 1
  SinusoidalLayout layout = SinusoidalLayout::kInterleaved;
  SinusoidalDivisor divisor = SinusoidalDivisor::kHalf;
};

/// Checks a SinusoidalParams.
///
/// Errors:  posenc::ConfigError if d_model < 2 ("d_model must be >= 2 ..., got 0"), if d_model is odd
///          ("d_model must be even: sinusoidal channels come in (sin, cos) pairs that share one
///          frequency, got 5"), or if base is not finite or <= 1 (then the frequencies would not decay
///          geometrically from 1; base = 1 makes every pair the same). Messages name field and value.
/// Source:  Vaswani et al. 2017, Sec. 3.5.
void ValidateSinusoidalParams(const SinusoidalParams& params);

/// The angular frequencies omega_i = base^(-i / divisor) for pair i.
///
/// Shapes:  returns omega[d_model / 2], float64, contiguous; omega[0] = 1, decreasing in i.
/// Units:   radians/token.
/// Errors:  as ValidateSinusoidalParams.
/// Source:  Vaswani et al. 2017, Sec. 3.5 (kHalf); fairseq `get_embedding` / tensor2tensor
///          `get_timing_signal_1d` / DDPM `get_timestep_embedding` (kHalfMinusOne, divisor clamped >= 1).
/// Precision: std::pow in double (glibc: < 1 ulp); no float32 rounding, so the angle p * omega_i is
///          formed in double and rounded to float32 only once, after sin/cos.
std::vector<double> SinusoidalFrequencies(const SinusoidalParams& params);

/// Fills out with one encoding row per position id: out[r, :] = PE(position_ids[r]).
///
/// Shapes:  position_ids[n_positions] (int64, any value, negative allowed, repeats allowed);
///          out[n_positions, d_model], float32, row-major, contiguous; overwritten (not accumulated).
/// Layout:  params.layout (kInterleaved or kConcatenated).
/// Units:   positions in tokens; angles p * omega_i in radians; values dimensionless in [-1, 1].
/// Errors:  ConfigError as ValidateSinusoidalParams; ShapeError if out.size() != n_positions * d_model
///          (the message gives both sizes). Nothing is written when it throws.
/// Source:  Vaswani et al. 2017, Sec. 3.5.
/// Precision: angle = double(p) * omega_i in double, then std::sin/std::cos in double, then one rounding to
///          float32. Error <= 0.5 ulp(float32) + |p| * omega_i * 2^-51 (double rounding of omega_i and of the
///          product); for |p| <= 2^24 that is <= 2^-25 + 2^-27 absolute (tests enforce this bound). No vectorised
///          sin/cos is used: Highway's are float-accurate only on a limited angle range, and any other
///          formulation would change float32 bits.
/// Threads: a call with >= 2^15 (sin, cos) pairs (n_positions * d_model / 2) spreads blocks of 16 rows over
///          OpenMP threads (not on the scalar kernel path, not inside an active parallel region); each value
///          depends on its position only, so the output bits do not depend on the split.
void SinusoidalTable(const SinusoidalParams& params, std::span<const int64_t> position_ids, std::span<float> out);

/// Convenience: returns the table [position_ids.size(), d_model] (float32, row-major) that the overload
/// above fills. Errors, layout and precision as above.
std::vector<float> SinusoidalTable(const SinusoidalParams& params, std::span<const int64_t> position_ids);

/// Adds the encoding to token embeddings in place: x[t, :] += PE(position_ids[t]).
///
/// Shapes:  x[n_tokens, d_model], float32, row-major, contiguous, modified in place;
///          position_ids[n_tokens] (one position per token; any int64).
/// Layout:  params.layout. Accumulates into x (adds; never overwrites).
/// Units:   positions in tokens.
/// Errors:  ConfigError as ValidateSinusoidalParams; ShapeError if x.size() != n_tokens * d_model.
///          x is untouched when it throws.
/// Source:  Vaswani et al. 2017, Sec. 3.5 ("we add positional encodings to the input embeddings").
/// Precision: each PE value is first rounded to float32 (as SinusoidalTable), then added in float32, so
///          the result equals x + SinusoidalTable(...) bit for bit, on the SIMD and the scalar kernel path alike.
/// Kernel:  rows are built 16 at a time (threads as SinusoidalTable) and added by kernels::PeRowsKernel
///          (Highway SIMD; the scalar reference when POSENC_KERNEL=scalar or SetPeKernelPath(kScalar)). The
///          libm calls dominate the cost; when the positions come from a fixed range, precompute
///          SinusoidalTable(params, {0 .. max-1}) once into a LearnedPositionalEmbedding (pe/learned.h) and add it
///          with LearnedPeForwardAdd: the same bits at memory speed.
/// Backward: PE has no parameters; dL/dx_in = dL/dx_out (identity), so there is no backward function.
void AddSinusoidal(const SinusoidalParams& params, std::span<const int64_t> position_ids, std::span<float> x);

/// The shift operator M_k with PE(p + k) = M_k * PE(p) for every position p (M_k depends on k only).
///
/// Shapes:  returns M_k[d_model, d_model], float64, row-major: out_row = M_k * in_row, i.e.
///          out[r] = sum_c M_k[r, c] * in[c].
/// Layout:  params.layout. M_k is block-diagonal over pairs: with (s_i, c_i) the sin and cos channels of
///          pair i (channels (2i, 2i+1) interleaved, (i, half + i) concatenated) and a = k * omega_i,
///            s_i' =  cos(a) * s_i + sin(a) * c_i        [sin(x + a) = sin x cos a + cos x sin a]
///            c_i' = -sin(a) * s_i + cos(a) * c_i        [cos(x + a) = cos x cos a - sin x sin a]
///          every other entry is 0. M_k is orthogonal, M_0 = I, M_a * M_b = M_{a+b}, M_{-k} = M_k^T.
/// Units:   k in tokens (any int64); angles in radians.
/// Errors:  ConfigError as ValidateSinusoidalParams.
/// Source:  Vaswani et al. 2017, Sec. 3.5 ("PE_{pos+k} can be represented as a linear function of PE_pos").
std::vector<double> SinusoidalShiftMatrix(const SinusoidalParams& params, int64_t k);

}  // namespace posenc
