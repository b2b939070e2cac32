// `posenc demo rope`: frequencies, the worked example, the relative-position identity, the exact score
// formula (with its sin term) and RoFormer's long-distance decay bound. Rotations go through
// posenc/rope/apply.h (interleaved pairs (2i, 2i+1), exact precision).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace posenc::demo {

/// The seed's worked example: head_dim 4, rope_theta 10000.
struct RopeWorkedExample {
  int64_t head_dim = 4;
  double rope_theta = 10000.0;
  std::vector<float> inv_freq;  // [2], radians/token: DefaultInvFreq = [1, fl32(0.01)]
  int64_t position = 1;
  std::vector<double> angle_rad;  // [2]: position * inv_freq, radians
  std::vector<double> angle_deg;  // [2]: the same in degrees
  std::vector<float> x;           // [4]: [1, 0, 1, 0]
  std::vector<float> rotated;     // [4]: ApplyRope(x) at `position` = [cos 1, sin 1, cos .01, sin .01]
};

/// <R(m) q, R(n) k> against <R(m+t) q, R(n+t) k> for one random q, k.
struct RelativeCheck {
  int64_t m = 0, n = 0, t = 0;  // positions, tokens
  double score = 0.0;           // <R(m) q, R(n) k>, rotation in float32 (ApplyRope), dot in double
  double shifted_score = 0.0;   // <R(m+t) q, R(n+t) k>
  double bound = 0.0;           // float32 rounding bound on |score - shifted_score| (RopeScoreBound, twice)
};

/// The rotated dot product against the per-pair score formula, for one (q, k, m, n).
struct ScoreFormulaCheck {
  int64_t m = 0, n = 0;        // positions, tokens
  double rotated_dot = 0.0;    // <R(m) q, R(n) k>: ApplyRope in float32, dot in double
  double exact_formula = 0.0;  // sum_i (q2i k2i + q2i+1 k2i+1) cos((m-n) th_i) + (q2i k2i+1 - q2i+1 k2i) sin(...)
  double cos_only = 0.0;       // the shortened form: sum_i (q2i k2i + q2i+1 k2i+1) cos((m-n) th_i)
  double sin_term = 0.0;       // exact_formula - cos_only: sum_i (q2i k2i+1 - q2i+1 k2i) sin((m-n) th_i)
  double bound = 0.0;          // float32 rounding bound on |rotated_dot - exact_formula|
};

/// One point of RoFormer's long-distance decay bound.
struct DecayPoint {
  int64_t distance = 0;  // m - n, tokens
  double bound = 0.0;    // RopeDecayBound
};

/// RopeDecayBound over every distance of a window [from, to).
struct DecayWindow {
  int64_t from = 0, to = 0;  // tokens
  double mean = 0.0, min = 0.0, max = 0.0;
};

/// Everything `posenc demo rope` prints.
struct RopeDemo {
  RopeWorkedExample worked;
  int64_t head_dim = 128;  // head size of the random checks and of the decay bound
  double rope_theta = 10000.0;
  std::vector<float> q, k;                 // [head_dim] each: DemoRng(seed).Symmetric() values
  std::vector<RelativeCheck> relative;     // 5 random (m, n, t)
  std::vector<ScoreFormulaCheck> formula;  // 5 random (m, n) with the same q, k
  ScoreFormulaCheck unit_example;          // head_dim 2, q = (1, 0), k = (0, 1), m = 1, n = 0: sin(1) vs 0
  std::vector<DecayPoint> decay;           // selected distances 0 .. 65536
  std::vector<DecayWindow> decay_windows;  // [2^k, 2^(k+1)) for k = 6..15, every distance
  double random_phase_level = 0.0;         // (1/(d/2)) sum_j sqrt(pi j)/2: B's level when the phases are random
};

/// The score of q at position m and k at position n, rotated by ApplyRope (interleaved, kExact, the
/// library's float32 inv_freq for rope_theta) and dotted in double.
/// Shapes: q, k [head_dim] (head_dim even). Units: positions in tokens.
/// Errors: posenc::ConfigError for odd head_dim (from DefaultInvFreq); ShapeError if q and k differ in size.
double RotatedScore(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n, double rope_theta);

/// Per-pair score formula of RoFormer Sec. 3.4.2 in double, with th_i the library's float32 inv_freq:
///   sum_i (q2i k2i + q2i+1 k2i+1) cos((m-n) th_i) + (q2i k2i+1 - q2i+1 k2i) sin((m-n) th_i).
/// `with_sin_term` = false gives the common shortened (wrong) form without the sin term.
/// Shapes and errors: as RotatedScore.
double RopeScoreFormula(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n, double rope_theta,
                        bool with_sin_term = true);

/// Bound on |RotatedScore - the exact score| from float32 rounding: with P_q,i = |q2i| + |q2i+1| (same for k),
/// each rotated element is off by <= 4u P_i (tables within 1 ulp, two products and a difference rounded;
/// u = 2^-24) and |k'2i| + |k'2i+1| <= sqrt(2) P_k,i, so |error| <= 8 sqrt(2) u sum_i P_q,i P_k,i, plus
/// (|m| + |n| + head_dim) 2^-50 sum_i P_q,i P_k,i for the double-precision angles and dot product.
double RopeScoreBound(std::span<const float> q, std::span<const float> k, int64_t m, int64_t n);

/// RoFormer Sec. 3.4.3: B(D) = (1/(d/2)) sum_{j=1}^{d/2} |S_j(D)|, S_j = sum_{i=0}^{j-1} e^{i D th_i},
/// th_i = rope_theta^(-2i/d) in double (RoFormer's th_i = 10000^(-2(i-1)/d), i = 1..d/2, shifted to 0-based).
/// |<R(m)q, R(n)k>| <= (max_i |h_{i+1} - h_i|) d/2 B(m - n) with h_i = q_[2i:2i+1] k*_[2i:2i+1] (complex).
/// B(0) = (d/2 + 1)/2. Shapes: returns [distances.size()]. Units: distances in tokens.
/// Errors: posenc::ConfigError if head_dim is odd or < 2, or rope_theta <= 1.
std::vector<double> RopeDecayBound(int64_t head_dim, double rope_theta, std::span<const int64_t> distances);

/// Computes the rope demo; `seed` fixes q, k and the positions.
RopeDemo RunRopeDemo(uint64_t seed = 4);

/// The demo as terminal text.
std::string RenderRopeDemo(const RopeDemo& demo);

/// Writes `rope_decay.png` into `dir`: RopeDecayBound(head_dim, rope_theta) for distances 0..4096 (every
/// token) on a linear axis and 1..65536 on a log axis. Returns the path. Errors: IoError as WriteGnuplotPng.
std::filesystem::path PlotRopeDecay(const RopeDemo& demo, const std::filesystem::path& dir);

}  // namespace posenc::demo
