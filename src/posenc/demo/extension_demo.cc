#include "posenc/demo/extension_demo.h"

#include "posenc/demo/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "posenc/report/gnuplot.h"

namespace posenc::demo {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

ExtensionMethod Method(std::string name, const RopeParams& params) {
  ExtensionMethod m;
  m.name = std::move(name);
  m.params = params;
  m.freqs = ComputeRopeFrequencies(params);
  for (float inv : m.freqs.inv_freq) m.wavelength.push_back(kTwoPi / static_cast<double>(inv));
  return m;
}

std::string RunsText(const std::vector<RegimeRun>& runs) {
  std::vector<std::string> parts;
  for (const RegimeRun& r : runs) {
    parts.push_back(
        fmt::format("{} {}..{} ({} pairs)", PairRegimeName(r.regime), r.first, r.last, r.last - r.first + 1));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

ExtensionDemo RunExtensionDemo() {
  ExtensionDemo demo;
  const double d = static_cast<double>(demo.head_dim);
  const double L0 = static_cast<double>(demo.original_max_position_embeddings);
  RopeParams base;
  base.head_dim = demo.head_dim;
  base.rope_theta = demo.rope_theta;
  base.max_position_embeddings = demo.max_position_embeddings;

  RopeParams pi = base;
  pi.rope_type = RopeType::kLinear;
  pi.factor = demo.factor;
  RopeParams times = base;
  times.rope_theta = demo.rope_theta * demo.factor;
  RopeParams ntk = base;
  ntk.rope_type = RopeType::kNtk;
  ntk.factor = demo.factor;
  RopeParams yarn = base;
  yarn.rope_type = RopeType::kYarn;
  yarn.factor = demo.factor;
  yarn.original_max_position_embeddings = demo.original_max_position_embeddings;
  RopeParams llama3 = base;
  llama3.rope_type = RopeType::kLlama3;
  llama3.factor = demo.factor;
  llama3.low_freq_factor = 1.0;
  llama3.high_freq_factor = 4.0;
  llama3.original_max_position_embeddings = demo.original_max_position_embeddings;

  demo.methods = {Method("original", base), Method("PI", pi),     Method("base x4", times),
                  Method("NTK-aware", ntk), Method("YaRN", yarn), Method("Llama-3", llama3)};
  const ExtensionMethod& orig = demo.methods[0];
  const ExtensionMethod& lin = demo.methods[1];

  // PI
  for (int64_t p : {int64_t{1024}, int64_t{4096}, demo.max_position_embeddings - 1}) {
    PiPosition pp;
    pp.position = p;
    pp.compressed = static_cast<double>(p) / demo.factor;
    for (size_t i = 0; i < orig.freqs.inv_freq.size(); ++i) {
      const double a = static_cast<double>(p) * lin.freqs.inv_freq[i];
      const double b = pp.compressed * orig.freqs.inv_freq[i];
      pp.max_angle_diff = std::max(pp.max_angle_diff, std::fabs(a - b));
    }
    demo.pi.push_back(pp);
  }
  demo.pi_pair0_step = lin.freqs.inv_freq[0];
  // base x s vs NTK-aware
  demo.base_times_factor = times.rope_theta;
  demo.ntk_exponent = d / (d - 2.0);
  demo.ntk_base = demo.rope_theta * std::pow(demo.factor, demo.ntk_exponent);
  demo.base_times_lowest_ratio = demo.methods[2].wavelength.back() / orig.wavelength.back();
  demo.ntk_lowest_ratio = demo.methods[3].wavelength.back() / orig.wavelength.back();
  // YaRN
  auto corr = [&](double rotations) {
    return d * std::log(L0 / (kTwoPi * rotations)) / (2.0 * std::log(demo.rope_theta));
  };
  demo.yarn_corr_fast = corr(32.0);
  demo.yarn_corr_slow = corr(1.0);
  demo.yarn_range = YarnCorrectionRange(yarn);
  demo.yarn_runs = RegimeRuns(PairRegimes(yarn));
  demo.yarn_attention_factor = demo.methods[4].freqs.attention_factor;
  // Llama-3
  demo.llama3_high_freq_wavelen = L0 / *llama3.high_freq_factor;
  demo.llama3_low_freq_wavelen = L0 / *llama3.low_freq_factor;
  demo.llama3_kept_below = (d / 2.0) * std::log(demo.llama3_high_freq_wavelen / kTwoPi) / std::log(demo.rope_theta);
  demo.llama3_interpolated_above =
      (d / 2.0) * std::log(demo.llama3_low_freq_wavelen / kTwoPi) / std::log(demo.rope_theta);
  demo.llama3_runs = RegimeRuns(PairRegimes(llama3));
  demo.table_pairs = {0, 8, 16, 17, 24, 30, 31, 36, 40, 41, 48, 56, 63};
  return demo;
}

std::string RenderExtensionDemo(const ExtensionDemo& demo) {
  std::string out;
  const double s = demo.factor;
  out += "== extension: running past the training length ==\n\n";
  out += fmt::format(
      "Llama-2 head dims: head_dim = {}, rope_theta = {}, trained at L0 = {}, extended x{} to L = {}.\n\n",
      demo.head_dim, demo.rope_theta, demo.original_max_position_embeddings, s, demo.max_position_embeddings);

  out += fmt::format(
      "PI (position interpolation, linear): every angle is divided by s = {}, i.e. position p\n"
      "rotates like position p / s did in training:\n",
      s);
  for (const PiPosition& p : demo.pi) {
    out += fmt::format("  position {:>5} -> {:>8.2f}   (max angle difference over the 64 pairs: {})\n", p.position,
                       p.compressed, p.max_angle_diff);
  }
  out += fmt::format(
      "  So 4096 -> 1024 and the window end 8192 -> 2048 (exclusive: the last position, 8191, lands at\n"
      "  2047.75, 0.75 past the last trained position 2047). The price is resolution: every pair is\n"
      "  slowed by s, the fast ones too; pair 0 now turns {} rad per token instead of 1, so\n"
      "  neighbouring tokens are 4 times closer than anything the model saw in training.\n\n",
      demo.pi_pair0_step);

  out += fmt::format(
      "\"Multiply the base by s\" is not NTK-aware scaling:\n"
      "  base x {}   : {} -> {}\n"
      "  NTK-aware  : {} * {}^(d/(d-2)) = {} * {}^({}/{}) = {:.2f}\n",
      s, demo.rope_theta, demo.base_times_factor, demo.rope_theta, s, demo.rope_theta, s, demo.head_dim,
      demo.head_dim - 2, demo.ntk_base);
  out += fmt::format(
      "  NTK-aware chooses the base so that the slowest pair (i = d/2 - 1) is slowed by exactly s, like\n"
      "  PI, while pair 0 is untouched. Slowest-pair wavelength ratio to the original:\n"
      "    base x {}: {:.6f} (= {}^({}/{}))    NTK-aware: {:.6f} (= {} up to float32 inv_freq)\n\n",
      s, demo.base_times_lowest_ratio, s, demo.head_dim - 2, demo.head_dim, demo.ntk_lowest_ratio, s);

  out += fmt::format(
      "YaRN (beta_fast 32, beta_slow 1): a pair that turns more than 32 times in L0 is kept, less\n"
      "than once is interpolated (divided by s), in between blended by a ramp over the pair index.\n"
      "  correction range: d ln(L0/(2 pi beta)) / (2 ln base) = {:.4f} (beta 32) .. {:.4f} (beta 1)\n"
      "  -> floor/ceil: low = {}, high = {}; ramp_i = (i - low) / (high - low), clamped to [0, 1]\n"
      "  regimes: {}\n",
      demo.yarn_corr_fast, demo.yarn_corr_slow, demo.yarn_range.low, demo.yarn_range.high, RunsText(demo.yarn_runs));
  out += fmt::format(
      "  attention factor sqrt(1/t) = 0.1 ln s + 1 = {:.6f} multiplies cos AND sin, so every q.k (the\n"
      "  logits) is multiplied by its square, 1/t = {:.6f}, not by {:.6f}.\n\n",
      demo.yarn_attention_factor, demo.yarn_attention_factor * demo.yarn_attention_factor, demo.yarn_attention_factor);

  out += fmt::format(
      "Llama-3 (low_freq_factor 1, high_freq_factor 4): bands by wavelength, not by pair index:\n"
      "  wavelength < L0/high_freq_factor = {} tokens: kept                    (pairs i < {:.4f})\n"
      "  wavelength > L0/low_freq_factor  = {} tokens: frequency divided by s (pairs i > {:.4f})\n"
      "  in between: blended by smooth = (L0/wavelength - low) / (high - low)\n"
      "  regimes: {}\n\n",
      demo.llama3_high_freq_wavelen, demo.llama3_kept_below, demo.llama3_low_freq_wavelen,
      demo.llama3_interpolated_above, RunsText(demo.llama3_runs));

  out += fmt::format("Effective wavelength 2 pi / inv_freq (tokens) per pair; L0 = {}, L = {}:\n",
                     demo.original_max_position_embeddings, demo.max_position_embeddings);
  out += fmt::format("  {:>4}", "pair");
  for (const ExtensionMethod& m : demo.methods) out += fmt::format("  {:>10}", m.name);
  out += "\n";
  for (int64_t i : demo.table_pairs) {
    out += fmt::format("  {:>4}", i);
    for (const ExtensionMethod& m : demo.methods)
      out += fmt::format("  {:>10.1f}", m.wavelength[static_cast<size_t>(i)]);
    out += "\n";
  }
  out +=
      "  A pair whose wavelength exceeds L0 never completed a turn in training; at L it must not see angles\n"
      "  it never saw. PI and the interpolated pairs of YaRN / Llama-3 stretch those by s; NTK-aware stretches\n"
      "  every pair by s^(2i/(d-2)); YaRN and Llama-3 leave the fast pairs exactly as trained.\n";
  return out;
}

std::filesystem::path PlotExtensionWavelengths(const ExtensionDemo& demo, const std::filesystem::path& dir) {
  GnuplotData data{"w", {}};
  const std::vector<double>& original = demo.methods.front().wavelength;
  const size_t half = original.size();
  for (size_t i = 0; i < half; ++i) {
    std::string line = fmt::format("{}", i);
    for (const ExtensionMethod& m : demo.methods) line += fmt::format(" {:.6g}", m.wavelength[i]);
    for (const ExtensionMethod& m : demo.methods) line += fmt::format(" {:.6g}", m.wavelength[i] / original[i]);
    data.lines.push_back(line);
  }
  const size_t n = demo.methods.size();
  const char* styles[] = {"lw 3 lc rgb 'black'",   "lw 2 dt 2 lc rgb '#009E73'", "lw 2 dt 3 lc rgb '#CC79A7'",
                          "lw 2 lc rgb '#E69F00'", "lw 2 lc rgb '#0072B2'",      "lw 2 lc rgb '#D55E00'"};
  std::string left = "plot ", right = "plot ";
  for (size_t m = 0; m < n; ++m) {
    left +=
        fmt::format("$w using 1:{} with lines {} title {}, ", m + 2, styles[m % 6], GnuplotQuote(demo.methods[m].name));
    right += fmt::format("$w using 1:{} with lines {} title {}{}", n + m + 2, styles[m % 6],
                         GnuplotQuote(demo.methods[m].name), m + 1 < n ? ", " : "\n");
  }
  left += fmt::format("{} with lines lc rgb '#555555' dt 4 lw 2 title 'training length L0 = {}', ",
                      demo.original_max_position_embeddings, demo.original_max_position_embeddings);
  left += fmt::format("{} with lines lc rgb '#AAAAAA' dt 4 lw 2 title 'extended length L = {}'\n",
                      demo.max_position_embeddings, demo.max_position_embeddings);
  const std::filesystem::path png = dir / DemoPlotFiles(DemoTopic::kExtension).front();
  const std::string body = fmt::format(
      "set multiplot layout 1,2 title 'Llama-2 head dims (head\\_dim {}, base {}) trained at L0 = {}, extended x{}'\n"
      "set xlabel 'pair i'\nset grid\nset xrange [0:{}]\nset key top left\n"
      "set title 'effective wavelength 2{{/Symbol p}}/inv\\_freq'\nset ylabel 'tokens'\nset logscale y 10\n{}"
      "unset logscale y\nset yrange [0:{}]\nset title 'stretch: wavelength / original wavelength'\n"
      "set ylabel 'ratio'\nset key at graph 0.02, 0.76 left top\n{}unset multiplot\n",
      demo.head_dim, demo.rope_theta, demo.original_max_position_embeddings, demo.factor, half - 1, left,
      demo.factor + 0.5, right);
  WriteGnuplotPng(png, 1400, 600, {data}, body);
  return png;
}

}  // namespace posenc::demo
