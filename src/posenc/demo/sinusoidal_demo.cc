#include "posenc/demo/sinusoidal_demo.h"

#include "posenc/demo/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "posenc/demo/common.h"
#include "posenc/report/gnuplot.h"
#include "posenc/pe/sinusoidal.h"

namespace posenc::demo {
namespace {

constexpr double kTwoPi = 2.0 * std::numbers::pi;

SinusoidalParams Paper(int64_t d_model) {
  SinusoidalParams p;
  p.d_model = d_model;  // base 10000, interleaved, divisor d/2: Vaswani et al. 2017
  return p;
}

// max over channels |PE_f32(p+k) - M_k PE_f32(p)| for one (p, k); M_k and the product in double.
double ShiftError(const SinusoidalParams& params, int64_t p, int64_t k) {
  const int64_t d = params.d_model;
  const std::vector<int64_t> positions = {p, p + k};
  const std::vector<float> rows = SinusoidalTable(params, positions);  // [2, d]
  const std::vector<double> m = SinusoidalShiftMatrix(params, k);      // [d, d]
  double worst = 0.0;
  for (int64_t r = 0; r < d; ++r) {
    double shifted = 0.0;
    for (int64_t c = 0; c < d; ++c) shifted += m[static_cast<size_t>(r * d + c)] * rows[static_cast<size_t>(c)];
    worst = std::max(worst, std::fabs(static_cast<double>(rows[static_cast<size_t>(d + r)]) - shifted));
  }
  return worst;
}

double ShiftBound(int64_t p, int64_t k) {
  auto e = [](int64_t pos) { return 0x1p-25 + std::fabs(static_cast<double>(pos)) * 0x1p-51; };
  return std::sqrt(2.0) * e(p) + e(p + k) + (std::fabs(static_cast<double>(k)) + 4.0) * 0x1p-51;
}

}  // namespace

SinusoidalDemo RunSinusoidalDemo(uint64_t seed) {
  SinusoidalDemo demo;
  // worked example
  demo.worked.omega = SinusoidalFrequencies(Paper(demo.worked.d_model));
  demo.worked.positions = {0, 1, 2};
  demo.worked.table = SinusoidalTable(Paper(demo.worked.d_model), demo.worked.positions);
  // clock hands, d_model = 128
  const SinusoidalParams big = Paper(demo.clock_d_model);
  const std::vector<double> omega = SinusoidalFrequencies(big);
  for (int64_t pair : {0, 1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 63}) {
    ClockHand h;
    h.pair = pair;
    h.omega = omega[static_cast<size_t>(pair)];
    h.wavelength = kTwoPi / h.omega;
    h.turns = static_cast<double>(demo.heatmap_positions) / h.wavelength;
    demo.clock.push_back(h);
  }
  demo.longest_wavelength = kTwoPi / omega.back();
  demo.paper_claimed_longest = kTwoPi * big.base;
  SinusoidalParams t2t = big;
  t2t.divisor = SinusoidalDivisor::kHalfMinusOne;
  demo.t2t_longest_wavelength = kTwoPi / SinusoidalFrequencies(t2t).back();
  // shift checks
  DemoRng rng(seed);
  for (int i = 0; i < 5; ++i) {
    ShiftCheck s;
    s.p = rng.Int(0, 100000);
    s.k = rng.Int(-5000, 5000);
    s.max_abs_error = ShiftError(big, s.p, s.k);
    s.bound = ShiftBound(s.p, s.k);
    demo.shifts.push_back(s);
  }
  return demo;
}

std::string RenderSinusoidalDemo(const SinusoidalDemo& demo) {
  std::string out;
  auto add = [&out](const std::string& s) { out += s; };
  const SinusoidalWorkedExample& w = demo.worked;
  add("== sinusoidal: absolute positions as sin/cos of geometric frequencies (Vaswani et al. 2017, 3.5) ==\n\n");
  add("PE(pos, 2i) = sin(pos * omega_i), PE(pos, 2i+1) = cos(pos * omega_i), omega_i = 10000^(-2i/d)\n\n");
  add(fmt::format("Worked example, d = {}: omega = [{}]\n", w.d_model, fmt::join(w.omega, ", ")));
  for (size_t r = 0; r < w.positions.size(); ++r) {
    std::vector<std::string> cells;
    for (int64_t c = 0; c < w.d_model; ++c) {
      cells.push_back(fmt::format("{:9.6f}", w.table[r * static_cast<size_t>(w.d_model) + static_cast<size_t>(c)]));
    }
    add(fmt::format("  PE[{}] = [{}]\n", w.positions[r], fmt::join(cells, ", ")));
  }
  add("  (pair 0 turns 1 rad per token; pair 1 turns 0.01 rad, so its cos stays near 1 for a long time)\n\n");

  add(fmt::format("Clock hands, d = {}: pair i is a hand turning omega_i rad per token\n", demo.clock_d_model));
  add(fmt::format("  {:>4}  {:>12}  {:>14}  {:>14}\n", "pair", "omega rad/tok", "wavelength tok",
                  fmt::format("turns in {}", demo.heatmap_positions)));
  for (const ClockHand& h : demo.clock) {
    add(fmt::format("  {:>4}  {:>12.6g}  {:>14.2f}  {:>14.4f}\n", h.pair, h.omega, h.wavelength, h.turns));
  }
  add("  Fast hands tell neighbours apart; slow hands tell far-apart positions apart. Pairs whose hand\n"
      "  turns less than once over the context only ever see a small arc of their circle.\n\n");
  add("Correction: the paper says the wavelengths run \"from 2 pi to 10000 * 2 pi\". With its own formula\n"
      "(exponent 2i/d, i < d/2) the slowest pair is i = d/2 - 1, so the longest wavelength is\n");
  add(fmt::format("  2 pi * 10000^((d-2)/d) = {:.1f} tokens for d = {}, not 2 pi * 10000 = {:.1f}.\n",
                  demo.longest_wavelength, demo.clock_d_model, demo.paper_claimed_longest));
  add(fmt::format("  Only the divisor d/2 - 1 (tensor2tensor, fairseq) reaches it: {:.1f} tokens.\n\n",
                  demo.t2t_longest_wavelength));

  add("Relative positions: PE(p + k) = M_k PE(p), M_k a block rotation by k * omega_i that does not\n"
      "depend on p. Checked for random p, k (d = 128; float32 table, M_k in double):\n");
  add(fmt::format("  {:>7}  {:>6}  {:>22}  {:>10}\n", "p", "k", "max|PE(p+k)-M_k PE(p)|", "bound"));
  for (const ShiftCheck& s : demo.shifts) {
    add(fmt::format("  {:>7}  {:>6}  {:>22.3g}  {:>10.3g}  {}\n", s.p, s.k, s.max_abs_error, s.bound,
                    s.max_abs_error <= s.bound ? "ok" : "FAIL"));
  }
  add("  (the bound is float32 rounding of the table: the identity is exact, the values are rounded)\n");
  return out;
}

std::filesystem::path PlotSinusoidalHeatmap(const SinusoidalDemo& demo, const std::filesystem::path& dir) {
  const SinusoidalParams params = Paper(demo.clock_d_model);
  std::vector<int64_t> positions(static_cast<size_t>(demo.heatmap_positions));
  for (size_t p = 0; p < positions.size(); ++p) positions[p] = static_cast<int64_t>(p);
  const std::vector<float> table = SinusoidalTable(params, positions);  // [n, d]
  GnuplotData data{"pe", {}};
  // matrix rows are y (channel), columns x (position)
  for (int64_t c = 0; c < params.d_model; ++c) {
    std::string line;
    for (size_t p = 0; p < positions.size(); ++p) {
      line += fmt::format("{:.5f} ", table[p * static_cast<size_t>(params.d_model) + static_cast<size_t>(c)]);
    }
    data.lines.push_back(line);
  }
  const std::filesystem::path png = dir / DemoPlotFiles(DemoTopic::kSinusoidal).front();
  const std::string body = fmt::format(
      "set title 'Sinusoidal PE, d = {}, positions 0..{} (channel 2i = sin, 2i+1 = cos of pos * 10000^{{-2i/d}})'\n"
      "set xlabel 'position (tokens)'\nset ylabel 'channel'\n"
      "set xrange [-0.5:{}.5]\nset yrange [-0.5:{}.5]\n"
      "set cbrange [-1:1]\nset palette defined (-1 'blue', 0 'white', 1 'red')\n"
      "plot $pe matrix with image notitle\n",
      params.d_model, demo.heatmap_positions - 1, demo.heatmap_positions - 1, params.d_model - 1);
  WriteGnuplotPng(png, 1100, 600, {data}, body);
  return png;
}

}  // namespace posenc::demo
