#include "posenc/demo/rope_demo.h"

#include "posenc/demo/demo.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>

#include "posenc/core/errors.h"
#include "posenc/demo/common.h"
#include "posenc/report/gnuplot.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"

namespace posenc::demo {
namespace {

void CheckPair(std::span<const float> q, std::span<const float> k) {
  if (q.size() != k.size()) {
    throw ShapeError(fmt::format("q has {} channels and k has {}; they must match", q.size(), k.size()));
  }
}

// x rotated to `pos` by ApplyRope (interleaved, exact precision).
std::vector<float> Rotate(std::span<const float> x, const RopeFrequencies& freqs, int64_t pos) {
  std::vector<float> out(x.begin(), x.end());
  const CosSinTable table = ComputeCosSin(freqs, std::vector<int64_t>{pos});
  const int64_t row = 0;
  ApplyRope(HeadsView::Contiguous(out.data(), 1, 1, static_cast<int64_t>(out.size())),
            std::span<const int64_t>(&row, 1), View(table), RopeLayout::kInterleaved);
  return out;
}

RopeFrequencies Plain(double rope_theta, int64_t head_dim) {
  RopeFrequencies f;
  f.inv_freq = DefaultInvFreq(rope_theta, head_dim);
  return f;
}

ScoreFormulaCheck FormulaCheck(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n,
                               double rope_theta) {
  ScoreFormulaCheck c;
  c.m = m;
  c.n = n;
  c.rotated_dot = RotatedScore(q, k, m, n, rope_theta);
  c.exact_formula = RopeScoreFormula(q, k, m, n, rope_theta, true);
  c.cos_only = RopeScoreFormula(q, k, m, n, rope_theta, false);
  c.sin_term = c.exact_formula - c.cos_only;
  c.bound = RopeScoreBound(q, k, m, n);
  return c;
}

}  // namespace

double RotatedScore(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n, double rope_theta) {
  CheckPair(q, k);
  const RopeFrequencies f = Plain(rope_theta, static_cast<int64_t>(q.size()));
  const std::vector<float> qr = Rotate(q, f, m), kr = Rotate(k, f, n);
  double s = 0.0;
  for (size_t j = 0; j < qr.size(); ++j) s += static_cast<double>(qr[j]) * kr[j];
  return s;
}

double RopeScoreFormula(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n, double rope_theta,
                        bool with_sin_term) {
  CheckPair(q, k);
  const std::vector<float> inv_freq = DefaultInvFreq(rope_theta, static_cast<int64_t>(q.size()));
  const double delta = static_cast<double>(m - n);
  double s = 0.0;
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const double a0 = q[2 * i], a1 = q[2 * i + 1], b0 = k[2 * i], b1 = k[2 * i + 1];
    const double angle = delta * static_cast<double>(inv_freq[i]);  // radians
    s += (a0 * b0 + a1 * b1) * std::cos(angle);
    if (with_sin_term) s += (a0 * b1 - a1 * b0) * std::sin(angle);
  }
  return s;
}

double RopeScoreBound(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n) {
  CheckPair(q, k);
  double sum = 0.0;
  for (size_t i = 0; 2 * i + 1 < q.size(); ++i) {
    sum += (std::fabs(q[2 * i]) + std::fabs(q[2 * i + 1])) * (std::fabs(k[2 * i]) + std::fabs(k[2 * i + 1]));
  }
  const double extra =
      (std::fabs(static_cast<double>(m)) + std::fabs(static_cast<double>(n)) + static_cast<double>(q.size())) * 0x1p-50;
  return (8.0 * std::sqrt(2.0) * kF32Roundoff + extra) * sum;
}

std::vector<double> RopeDecayBound(int64_t head_dim, double rope_theta, std::span<const int64_t> distances) {
  if (head_dim < 2 || head_dim % 2 != 0) {
    throw ConfigError(fmt::format("head_dim must be even and >= 2, got {}", head_dim));
  }
  if (!(rope_theta > 1.0) || !std::isfinite(rope_theta)) {
    throw ConfigError(fmt::format("rope_theta must be finite and > 1, got {}", rope_theta));
  }
  const int64_t half = head_dim / 2;
  std::vector<double> theta(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    theta[static_cast<size_t>(i)] = std::pow(rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
  }
  std::vector<double> out;
  out.reserve(distances.size());
  for (int64_t distance : distances) {
    std::complex<double> partial = 0.0;  // S_j
    double total = 0.0;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(distance) * theta[static_cast<size_t>(i)];
      partial += std::complex<double>(std::cos(angle), std::sin(angle));
      total += std::abs(partial);  // |S_{i+1}|
    }
    out.push_back(total / static_cast<double>(half));
  }
  return out;
}

RopeDemo RunRopeDemo(uint64_t seed) {
  RopeDemo demo;
  // worked example
  RopeWorkedExample& w = demo.worked;
  w.inv_freq = DefaultInvFreq(w.rope_theta, w.head_dim);
  for (float inv : w.inv_freq) {
    const double rad = static_cast<double>(w.position) * inv;
    w.angle_rad.push_back(rad);
    w.angle_deg.push_back(rad * 180.0 / std::numbers::pi);
  }
  w.x = {1.0f, 0.0f, 1.0f, 0.0f};
  w.rotated = Rotate(w.x, Plain(w.rope_theta, w.head_dim), w.position);
  // random q, k
  DemoRng rng(seed);
  demo.q.resize(static_cast<size_t>(demo.head_dim));
  demo.k.resize(static_cast<size_t>(demo.head_dim));
  for (float& v : demo.q) v = rng.Symmetric();
  for (float& v : demo.k) v = rng.Symmetric();
  for (int i = 0; i < 5; ++i) {
    RelativeCheck c;
    c.m = rng.Int(0, 4095);
    c.n = rng.Int(0, 4095);
    c.t = rng.Int(1, 100000);
    c.score = RotatedScore(demo.q, demo.k, c.m, c.n, demo.rope_theta);
    c.shifted_score = RotatedScore(demo.q, demo.k, c.m + c.t, c.n + c.t, demo.rope_theta);
    c.bound = RopeScoreBound(demo.q, demo.k, c.m, c.n) + RopeScoreBound(demo.q, demo.k, c.m + c.t, c.n + c.t);
    demo.relative.push_back(c);
  }
  for (int i = 0; i < 5; ++i) {
    const int64_t m = rng.Int(0, 4095), n = rng.Int(0, 4095);
    demo.formula.push_back(FormulaCheck(demo.q, demo.k, m, n, demo.rope_theta));
  }
  const std::vector<float> unit_q = {1.0f, 0.0f}, unit_k = {0.0f, 1.0f};
  demo.unit_example = FormulaCheck(unit_q, unit_k, 1, 0, demo.rope_theta);
  // decay
  const std::vector<int64_t> distances = {0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 16384, 65536};
  const std::vector<double> bounds = RopeDecayBound(demo.head_dim, demo.rope_theta, distances);
  for (size_t i = 0; i < distances.size(); ++i) demo.decay.push_back({distances[i], bounds[i]});
  std::vector<int64_t> all(65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  const std::vector<double> curve = RopeDecayBound(demo.head_dim, demo.rope_theta, all);
  for (int64_t from = 64; from < 65536; from *= 2) {
    DecayWindow w{from, 2 * from, 0.0, curve[static_cast<size_t>(from)], curve[static_cast<size_t>(from)]};
    for (int64_t d = from; d < 2 * from; ++d) {
      const double b = curve[static_cast<size_t>(d)];
      w.mean += b;
      w.min = std::min(w.min, b);
      w.max = std::max(w.max, b);
    }
    w.mean /= static_cast<double>(from);
    demo.decay_windows.push_back(w);
  }
  const int64_t half = demo.head_dim / 2;
  for (int64_t j = 1; j <= half; ++j)
    demo.random_phase_level += std::sqrt(std::numbers::pi * static_cast<double>(j)) / 2.0;
  demo.random_phase_level /= static_cast<double>(half);
  return demo;
}

std::string RenderRopeDemo(const RopeDemo& demo) {
  std::string out;
  const RopeWorkedExample& w = demo.worked;
  out += "== rope: rotate q and k by their positions (Su et al. 2021, RoFormer) ==\n\n";
  out += "Pair i of a head (channels 2i, 2i+1 here) turns by pos * theta_i, theta_i = base^(-2i/d).\n";
  out += fmt::format("Worked example, d = {}, base = {}: theta = [{}]  (float32, as the library stores them)\n",
                     w.head_dim, w.rope_theta, fmt::join(w.inv_freq, ", "));
  for (size_t i = 0; i < w.inv_freq.size(); ++i) {
    out += fmt::format("  position {}: pair {} turns {:.4g} rad = {:.4g} degrees\n", w.position, i, w.angle_rad[i],
                       w.angle_deg[i]);
  }
  out += fmt::format("  x = [{}] at position {} becomes [{}]\n", fmt::join(w.x, ", "), w.position,
                     fmt::join(w.rotated, ", "));
  out += "  = [cos 1, sin 1, cos 0.01, sin 0.01]\n\n";

  out += fmt::format("Relative positions: <R(m)q, R(n)k> = <R(m+t)q, R(n+t)k> (random q, k, d = {})\n", demo.head_dim);
  out += fmt::format("  {:>5} {:>5} {:>6}  {:>12}  {:>12}  {:>9}  {:>9}\n", "m", "n", "t", "score(m,n)",
                     "score(m+t,n+t)", "|diff|", "bound");
  for (const RelativeCheck& c : demo.relative) {
    out += fmt::format("  {:>5} {:>5} {:>6}  {:>12.7f}  {:>14.7f}  {:>9.2e}  {:>9.2e}\n", c.m, c.n, c.t, c.score,
                       c.shifted_score, std::fabs(c.score - c.shifted_score), c.bound);
  }
  out += "  (float32 rotations; the bound is their rounding: the identity itself is exact)\n\n";

  out +=
      "The exact score, pair by pair (RoFormer 3.4.2), with D = m - n:\n"
      "  <R(m)q, R(n)k> = sum_i (q2i k2i + q2i+1 k2i+1) cos(D theta_i) + (q2i k2i+1 - q2i+1 k2i) sin(D theta_i)\n";
  out += fmt::format("  {:>5} {:>5}  {:>12}  {:>12}  {:>9}  {:>12}  {:>12}\n", "m", "n", "rotated dot", "formula",
                     "|diff|", "cos only", "sin term");
  for (const ScoreFormulaCheck& c : demo.formula) {
    out += fmt::format("  {:>5} {:>5}  {:>12.7f}  {:>12.7f}  {:>9.2e}  {:>12.7f}  {:>12.7f}\n", c.m, c.n, c.rotated_dot,
                       c.exact_formula, std::fabs(c.rotated_dot - c.exact_formula), c.cos_only, c.sin_term);
  }
  const ScoreFormulaCheck& u = demo.unit_example;
  out +=
      "Wrong: the shortened form sum_i (q2i k2i + q2i+1 k2i+1) cos(D theta_i) drops the sin term. It is\n"
      "only right at D = 0 or when every pair of q is parallel to the same pair of k. Smallest\n"
      "counterexample,\n";
  out += fmt::format(
      "  d = 2, q = (1, 0), k = (0, 1), m = 1, n = 0: rotated dot = {:.6f} = sin(1); cos-only form = "
      "{:.6f}.\n",
      u.rotated_dot, u.cos_only);
  out +=
      "  Without the sin term the score would be even in D: it could not tell \"k before q\" from \"k after q\".\n\n";

  out += fmt::format("Long-distance decay (RoFormer 3.4.3), d = {}: with S_j = sum_{{i<j}} e^(i D theta_i),\n",
                     demo.head_dim);
  out += "  |score| <= max_i |h_i+1 - h_i| * sum_j |S_j|, and B(D) = (1/(d/2)) sum_j |S_j| decays with D:\n";
  out += fmt::format("  {:>8}  {:>10}\n", "D", "B(D)");
  for (const DecayPoint& p : demo.decay) out += fmt::format("  {:>8}  {:>10.4f}\n", p.distance, p.bound);
  out += fmt::format("  B(0) = (d/2 + 1)/2 = {} exactly: at D = 0 every e^(i D theta_i) is 1.\n",
                     demo.decay.front().bound);
  out += "  Over windows of D (every distance in the window):\n";
  out += fmt::format("  {:>15}  {:>8}  {:>8}  {:>8}\n", "D in", "mean B", "min B", "max B");
  for (const DecayWindow& w : demo.decay_windows) {
    out += fmt::format("  {:>15}  {:>8.4f}  {:>8.4f}  {:>8.4f}\n", fmt::format("[{}, {})", w.from, w.to), w.mean, w.min,
                       w.max);
  }
  out += fmt::format(
      "  Not the usual story: B is not monotone (it swings widely inside every window),\n"
      "  and it stops decaying after a few thousand tokens. It levels off near {:.2f} =\n"
      "  (1/(d/2)) sum_j sqrt(pi j)/2, the mean |S_j| of random unit phases: once D theta_i has\n"
      "  wrapped for most pairs the partial sums are random walks. And it is an upper bound for q, k\n"
      "  of bounded variation, not the score: it does not make any particular q, k score lower when\n"
      "  far apart.\n",
      demo.random_phase_level);
  return out;
}

std::filesystem::path PlotRopeDecay(const RopeDemo& demo, const std::filesystem::path& dir) {
  std::vector<int64_t> linear(4097);
  for (size_t i = 0; i < linear.size(); ++i) linear[i] = static_cast<int64_t>(i);
  std::vector<int64_t> logd;
  for (double e = 0.0; e <= 16.0 + 1e-9; e += 1.0 / 64.0) logd.push_back(std::llround(std::pow(2.0, e)));
  logd.erase(std::unique(logd.begin(), logd.end()), logd.end());
  const std::vector<double> lin_b = RopeDecayBound(demo.head_dim, demo.rope_theta, linear);
  const std::vector<double> log_b = RopeDecayBound(demo.head_dim, demo.rope_theta, logd);
  GnuplotData a{"lin", {}}, b{"log", {}};
  for (size_t i = 0; i < linear.size(); ++i) a.lines.push_back(fmt::format("{} {:.6f}", linear[i], lin_b[i]));
  for (size_t i = 0; i < logd.size(); ++i) b.lines.push_back(fmt::format("{} {:.6f}", logd[i], log_b[i]));
  const std::filesystem::path png = dir / DemoPlotFiles(DemoTopic::kRope).front();
  const std::string body = fmt::format(
      "set multiplot layout 1,2 title 'RoFormer long-distance bound B(D) = (1/(d/2)) sum_j |sum_{{i<j}} "
      "e^{{i D theta_i}}|, d = {}, theta_i = {}^{{-2i/d}}'\n"
      "set xlabel 'relative distance D = m - n (tokens)'\nset ylabel 'B(D)'\nset grid\n"
      "set xrange [0:4096]\nplot $lin with lines lw 1 title 'D = 0..4096'\n"
      "set logscale x 2\nset xrange [1:65536]\nset format x '2^{{%L}}'\n"
      "plot $log with lines lw 1 title 'D = 1..65536 (log axis)'\n"
      "unset multiplot\n",
      demo.head_dim, demo.rope_theta);
  WriteGnuplotPng(png, 1200, 500, {a, b}, body);
  return png;
}

}  // namespace posenc::demo
