// `posenc demo extension`: what each context-extension method does to the frequencies of Llama-2-sized
// heads (head_dim 128, rope_theta 10000) trained at 2048 tokens and extended x4 to 8192. Every frequency
// comes from ComputeRopeFrequencies; regimes from PairRegimes / YarnCorrectionRange.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "posenc/demo/common.h"
#include "posenc/rope/frequencies.h"
#include "posenc/rope/params.h"

namespace posenc::demo {

/// One method's frequency table.
struct ExtensionMethod {
  std::string name;                // "original", "PI", "base x4", "NTK-aware", "YaRN", "Llama-3"
  RopeParams params;               // what was handed to ComputeRopeFrequencies
  RopeFrequencies freqs;           // inv_freq [64] radians/token, attention_factor
  std::vector<double> wavelength;  // [64] tokens per turn: 2 pi / inv_freq (effective wavelength)
};

/// A position under position interpolation (PI): position p at factor s rotates like position p / s did.
struct PiPosition {
  int64_t position = 0;         // tokens, in the extended window
  double compressed = 0.0;      // position / factor: where PI puts it on the trained scale
  double max_angle_diff = 0.0;  // max_i |p * inv_freq_PI[i] - (p / s) * inv_freq[i]| in double (0: identical)
};

/// Everything `posenc demo extension` prints.
struct ExtensionDemo {
  int64_t head_dim = 128;
  double rope_theta = 10000.0;
  int64_t original_max_position_embeddings = 2048;  // L0, tokens
  double factor = 4.0;                              // s
  int64_t max_position_embeddings = 8192;           // L = s L0, tokens
  // PI
  std::vector<PiPosition> pi;  // positions 1024, 4096, 8191 (the last one of the window)
  double pi_pair0_step = 0.0;  // radians per token of pair 0 under PI (original: 1)
  // base x s against NTK-aware
  double base_times_factor = 0.0;        // rope_theta * s = 40000
  double ntk_exponent = 0.0;             // d / (d - 2) = 128/126
  double ntk_base = 0.0;                 // rope_theta * s^(d/(d-2))
  double base_times_lowest_ratio = 0.0;  // wavelength ratio (base x s / original) of the slowest pair: s^((d-2)/d)
  double ntk_lowest_ratio = 0.0;         // the same for NTK-aware: s (exactly, up to float32 inv_freq)
  // YaRN
  double yarn_corr_fast = 0.0;         // d ln(L0 / (2 pi beta_fast)) / (2 ln base), before floor
  double yarn_corr_slow = 0.0;         // d ln(L0 / (2 pi beta_slow)) / (2 ln base), before ceil
  YarnRange yarn_range;                // the library's [low, high] after floor / ceil / clamp
  std::vector<RegimeRun> yarn_runs;    // PairRegimes of the YaRN params
  double yarn_attention_factor = 0.0;  // 0.1 ln s + 1, multiplies cos and sin
  // Llama-3 (low_freq_factor 1, high_freq_factor 4)
  double llama3_high_freq_wavelen = 0.0;   // L0 / high_freq_factor = 512 tokens
  double llama3_low_freq_wavelen = 0.0;    // L0 / low_freq_factor = 2048 tokens
  double llama3_kept_below = 0.0;          // pairs i < this are kept: (d/2) ln(L0/(hff 2 pi)) / ln base
  double llama3_interpolated_above = 0.0;  // pairs i > this are interpolated: (d/2) ln(L0/(lff 2 pi)) / ln base
  std::vector<RegimeRun> llama3_runs;      // PairRegimes of the Llama-3 params
  std::vector<ExtensionMethod> methods;    // original, PI, base x4, NTK-aware, YaRN, Llama-3
  std::vector<int64_t> table_pairs;        // the pairs the wavelength table prints
};

/// Builds the RopeParams of each method for these dims (the library's own types: kDefault, kLinear,
/// kDefault with rope_theta * s, kNtk, kYarn, kLlama3) and computes everything above.
/// Errors: everything ComputeRopeFrequencies throws (none for the built-in values).
/// Source: Chen et al. 2023 (PI); bloc97 2023 (NTK-aware); Peng et al. 2023 (YaRN) Sec. 3.2-3.4;
///         Llama 3.1 `_compute_llama3_parameters`.
ExtensionDemo RunExtensionDemo();

/// The demo as terminal text.
std::string RenderExtensionDemo(const ExtensionDemo& demo);

/// Writes `extension_wavelengths.png` into `dir`: effective wavelength (log axis) per pair for each method,
/// with the training length L0 and the extended length L drawn across. Returns the path.
/// Errors: posenc::IoError as WriteGnuplotPng.
std::filesystem::path PlotExtensionWavelengths(const ExtensionDemo& demo, const std::filesystem::path& dir);

}  // namespace posenc::demo
