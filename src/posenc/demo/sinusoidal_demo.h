// `posenc demo sinusoidal`: the worked example, the clock-hands view, the shift matrix M_k and a heatmap,
// every number computed by posenc/pe/sinusoidal.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace posenc::demo {

/// The seed's worked example: d_model = 4, base 10000, positions 0..2, interleaved [sin_0, cos_0, sin_1, cos_1].
struct SinusoidalWorkedExample {
  int64_t d_model = 4;
  std::vector<double> omega;       // [d_model/2], radians/token: 1 and 0.01
  std::vector<int64_t> positions;  // [3]: 0, 1, 2
  std::vector<float> table;        // [3, d_model], row r = PE(positions[r]) (SinusoidalTable)
};

/// One "clock hand": frequency pair i of a d_model-channel encoding.
struct ClockHand {
  int64_t pair = 0;
  double omega = 0.0;       // radians/token: base^(-2i/d_model)
  double wavelength = 0.0;  // tokens per full turn: 2 pi / omega
  double turns = 0.0;       // full turns over the heatmap's positions 0..n_positions-1: n_positions / wavelength
};

/// PE(p + k) = M_k PE(p), checked for one (p, k).
struct ShiftCheck {
  int64_t p = 0;               // tokens
  int64_t k = 0;               // tokens (may be negative)
  double max_abs_error = 0.0;  // max over channels |PE_f32(p+k) - M_k PE_f32(p)|, M_k and the product in double
  double bound = 0.0;          // float32 rounding bound on that error (see RunSinusoidalDemo)
};

/// Everything `posenc demo sinusoidal` prints.
struct SinusoidalDemo {
  SinusoidalWorkedExample worked;
  int64_t clock_d_model = 128;          // channels of the clock-hands view and the heatmap
  int64_t heatmap_positions = 512;      // positions 0..511
  std::vector<ClockHand> clock;         // selected pairs of the 128-channel encoding
  double longest_wavelength = 0.0;      // 2 pi base^((d-2)/d): the paper's formula, pair d/2 - 1 (tokens)
  double paper_claimed_longest = 0.0;   // 2 pi base: what Sec. 3.5's prose says ("from 2 pi to 10000 * 2 pi")
  double t2t_longest_wavelength = 0.0;  // 2 pi base with divisor d/2 - 1 (tensor2tensor/fairseq), tokens
  std::vector<ShiftCheck> shifts;       // random (p, k) for d_model = 128
};

/// Computes the sinusoidal demo. `seed` fixes the random (p, k) of the shift checks (p in [0, 100000],
/// k in [-5000, 5000]; DemoRng, so the same on every platform).
///
/// Shift bound: SinusoidalTable's values are within e(p) = 2^-25 + |p| 2^-51 of the true PE(p) (its
/// documented precision, omega <= 1); a row of M_k holds two entries (cos a, sin a) with |cos a| + |sin a|
/// <= sqrt(2), so bound = sqrt(2) e(p) + e(p+k) + (|k| + 4) 2^-51 (M_k's double cos/sin of k omega and the
/// double product).
/// Source: Vaswani et al. 2017, Sec. 3.5; M_k as SinusoidalShiftMatrix.
SinusoidalDemo RunSinusoidalDemo(uint64_t seed = 2);

/// The demo as terminal text (a few screens): worked example, clock hands, the paper's wavelength claim
/// corrected, the shift checks.
std::string RenderSinusoidalDemo(const SinusoidalDemo& demo);

/// Writes `sinusoidal_heatmap.png` into `dir` (which must exist): PE[p, c] for d_model = clock_d_model,
/// positions 0..heatmap_positions-1, interleaved channels, colour scale -1..1. Returns the path written.
/// Errors: posenc::IoError as WriteGnuplotPng.
std::filesystem::path PlotSinusoidalHeatmap(const SinusoidalDemo& demo, const std::filesystem::path& dir);

}  // namespace posenc::demo
