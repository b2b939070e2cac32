#include "attention_suite.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>

#include "posenc/attention/attention.h"
#include "posenc/kernels/exp_kernel.h"
#include "posenc/attention/flash_attention.h"
#include "posenc/blas/gemm.h"
#include "posenc/kernels/flash_kernels.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/cos_sin.h"
#include "posenc/rope/frequencies.h"
#include "rope_suite.h"
#include "suite_util.h"

namespace posenc::bench {
namespace {

constexpr double kU = 1.0 / 16777216.0;  // 2^-24

}  // namespace

// Buffers of one case: raw q/k/v, the rope table, q/k rotated by ApplyRope (for the baselines), outputs.
struct AttentionWorkloadData {
  explicit AttentionWorkloadData(const AttentionCase& c) : c(c) {
    const int64_t L = c.n_tokens, hd = c.head_dim;
    std::mt19937 rng(1234);
    std::normal_distribution<float> nd;
    q.resize(static_cast<size_t>(L * c.n_heads * hd));
    k.resize(static_cast<size_t>(L * c.n_kv_heads * hd));
    v.resize(k.size());
    for (auto* x : {&q, &k, &v}) {
      for (float& e : *x) e = nd(rng);
    }
    RopeParams params;  // the library's own default RoPE (theta 10000) over positions 0 .. L-1
    params.head_dim = hd;
    params.rotary_dim = c.rotary_dim;
    params.rope_theta = 10000.0;
    std::vector<int64_t> rows(static_cast<size_t>(L));
    for (int64_t p = 0; p < L; ++p) rows[p] = p;
    table = ComputeCosSin(ComputeRopeFrequencies(params), rows);
    q_rot = q;
    k_rot = k;
    ApplyRope(HeadsView::Contiguous(q_rot.data(), L, c.n_heads, hd), rows, View(table), c.layout);
    ApplyRope(HeadsView::Contiguous(k_rot.data(), L, c.n_kv_heads, hd), rows, View(table), c.layout);
    out.assign(q.size(), 0.0f);
    out_row.assign(q.size(), 0.0f);
    out_naive.assign(q.size(), 0.0f);
  }

  AttentionDims dims() const { return {c.n_heads, c.n_kv_heads, c.head_dim}; }
  AttentionInputs raw() const {
    return {q.data(), c.n_tokens, c.n_heads * c.head_dim, 0, k.data(), v.data(), c.n_tokens, c.n_kv_heads * c.head_dim};
  }
  AttentionInputs rotated() const {
    AttentionInputs in = raw();
    in.q = q_rot.data();
    in.k = k_rot.data();
    return in;
  }

  // posenc: RoPE on q and k inside the call.
  void RunFlash() {
    FlashCausalAttention(dims(), raw(), {FlashRopeTarget::kQueriesAndKeys, View(table), c.layout}, 1.0f, out.data(),
                         c.n_heads * c.head_dim, flash_scratch, tiling);
  }
  // The row-at-a-time reference path on pre-rotated inputs (single-threaded by design).
  void RunRow() { CausalAttention(dims(), rotated(), 1.0f, out_row.data(), c.n_heads * c.head_dim, row_scratch); }
  // Per head: S = Q K^T (L x L, sgemm), causal softmax per row, O = P V (sgemm); pre-rotated inputs. Heads are
  // spread over `threads` OpenMP threads, each with its own L x L buffer and one-thread sgemm (OpenBLAS's own
  // threads would spin against the OpenMP softmax on a 2-core machine).
  void RunNaive(int threads) {
    const int64_t L = c.n_tokens, hd = c.head_dim, kv_mul = c.n_heads / c.n_kv_heads;
    const int64_t qs = c.n_heads * hd, ks = c.n_kv_heads * hd;
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    const int n_threads = static_cast<int>(std::min<int64_t>(threads, c.n_heads));
    scores.resize(static_cast<size_t>(n_threads * L * L));
    SetBlasThreads(1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
    for (int64_t h = 0; h < c.n_heads; ++h) {
      const int64_t g = h / kv_mul;
      float* S = scores.data() + omp_get_thread_num() * L * L;
      GemmNT(L, L, hd, q_rot.data() + h * hd, qs, k_rot.data() + g * hd, ks, S, L);
      for (int64_t i = 0; i < L; ++i) {
        float* row = S + i * L;
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j <= i; ++j) mx = std::max(mx, row[j] * scale);
        float sum = 0.0f;
        for (int64_t j = 0; j <= i; ++j) sum += (row[j] = ExpF32(row[j] * scale - mx));
        const float inv = 1.0f / sum;
        for (int64_t j = 0; j <= i; ++j) row[j] *= inv;
        for (int64_t j = i + 1; j < L; ++j) row[j] = 0.0f;
      }
      GemmNN(L, hd, L, S, L, v.data() + g * hd, ks, out_naive.data() + h * hd, qs);
    }
  }

  AttentionCase c;
  std::vector<float> q, k, v, q_rot, k_rot, out, out_row, out_naive, scores;
  CosSinTable table;
  FlashScratch flash_scratch;
  FlashTiling tiling;
  AttentionScratch row_scratch;
};

namespace {
using Workload = AttentionWorkloadData;

// Float64 reference for query row i, head h (rotation in double from the float32 inputs and table) and the
// bound of flash_attention.h / tests/attention/flash_attention_test.cc: returns max |got - ref| / bound.
double ErrorOverBound(const Workload& w, const std::vector<float>& got, int64_t i, int64_t h, int64_t k_block) {
  const AttentionCase& c = w.c;
  const int64_t hd = c.head_dim, half = c.rotary_dim / 2, g = h / (c.n_heads / c.n_kv_heads);
  auto rotate = [&](const float* x, int64_t p, std::vector<double>& r, std::vector<double>& ra) {
    for (int64_t d = 0; d < hd; ++d) {
      r[d] = x[d];
      ra[d] = std::fabs(x[d]);
    }
    for (int64_t t = 0; t < half; ++t) {
      const int64_t ia = c.layout == RopeLayout::kHalfSplit ? t : 2 * t;
      const int64_t ib = c.layout == RopeLayout::kHalfSplit ? t + half : 2 * t + 1;
      const double co = w.table.cos[p * half + t], si = w.table.sin[p * half + t], a = x[ia], b = x[ib];
      r[ia] = a * co - b * si;
      r[ib] = a * si + b * co;
      ra[ia] = std::fabs(a * co) + std::fabs(b * si);
      ra[ib] = std::fabs(a * si) + std::fabs(b * co);
    }
  };
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  const int64_t n = i + 1;
  std::vector<double> qr(hd), qa(hd), kr(hd), ka(hd), s(static_cast<size_t>(n));
  rotate(w.q.data() + (i * c.n_heads + h) * hd, i, qr, qa);
  double mx = -1e300, ds = 0;
  for (int64_t j = 0; j < n; ++j) {
    rotate(w.k.data() + (j * c.n_kv_heads + g) * hd, j, kr, ka);
    double dot = 0, dabs = 0;
    for (int64_t d = 0; d < hd; ++d) {
      dot += qr[d] * kr[d];
      dabs += qa[d] * ka[d];
    }
    s[j] = dot * scale;
    ds = std::max(ds, scale * static_cast<double>(hd + 6) * kU * dabs);
    mx = std::max(mx, s[j]);
  }
  double sum = 0;
  std::vector<double> wj(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) sum += (wj[j] = std::exp(s[j] - mx));
  const int64_t tiles = (n + k_block - 1) / k_block;
  double worst = 0;
  for (int64_t d = 0; d < hd; ++d) {
    double ref = 0, tol = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double vj = w.v[(j * c.n_kv_heads + g) * hd + d], wt = wj[j] / sum;
      ref += wt * vj;
      tol += wt * std::fabs(vj) * (2 * ds + kU * std::fabs(s[j] - mx) + static_cast<double>(2 * n + 6 * tiles + 8) * kU);
    }
    worst = std::max(worst, std::fabs(got[(i * c.n_heads + h) * hd + d] - ref) / tol);
  }
  return worst;
}

struct Variant {
  std::string name;
  std::function<void()> fn;
  int reps = 0;
  std::vector<double> seconds;
};

}  // namespace

AttentionWorkload::AttentionWorkload(const AttentionCase& c, const FlashTiling& tiling)
    : w_(std::make_unique<AttentionWorkloadData>(c)) {
  w_->tiling = tiling;
}
AttentionWorkload::~AttentionWorkload() = default;
void AttentionWorkload::RunFlash() { w_->RunFlash(); }
void AttentionWorkload::RunRow() { w_->RunRow(); }
void AttentionWorkload::RunNaive(int threads) { w_->RunNaive(threads); }
double AttentionWorkload::FlashErrorOverBound() {
  w_->RunFlash();
  double worst = 0;
  const int64_t L = w_->c.n_tokens;
  for (int64_t i : {int64_t{0}, L / 2, L - 1}) {
    for (int64_t h : {int64_t{0}, w_->c.n_heads - 1}) {
      worst = std::max(worst, ErrorOverBound(*w_, w_->out, i, h, w_->tiling.k_block));
    }
  }
  return worst;
}

std::vector<AttentionCase> DefaultAttentionCases(const std::string& filter) {
  std::vector<AttentionCase> all;
  for (int64_t L : {512, 2048, 8192}) {
    for (int64_t hd : {64, 128}) {
      const int64_t heads = L <= 2048 ? 32 : 4, kv = L <= 2048 ? 8 : 1;
      all.push_back({fmt::format("attention_L{}_hd{}_{}x{}", L, hd, heads, kv), L, heads, kv, hd, hd,
                     RopeLayout::kHalfSplit});
    }
  }
  std::vector<AttentionCase> kept;
  for (const AttentionCase& c : all) {
    if (MatchesFilter(c.name, filter)) kept.push_back(c);
  }
  return kept;
}

double AttentionFlops(const AttentionCase& c) {
  const double L = static_cast<double>(c.n_tokens);
  return static_cast<double>(c.n_heads) * 4.0 * static_cast<double>(c.head_dim) * L * (L + 1) / 2.0;
}

AttentionBenchReport RunAttentionBench(const AttentionBenchOptions& o) {
  auto log = [&](const std::string& s) {
    if (o.log) o.log(s);
  };
  if (o.threads > 0) omp_set_num_threads(o.threads);
  AttentionBenchReport rep;
  rep.threads = omp_get_max_threads();
  rep.hwy_target = kernels::FlashKernelTargetName();
  const std::vector<AttentionCase> cases = DefaultAttentionCases(o.filter);
  if (cases.empty()) return rep;
  if (o.sgemm_gflops > 0) {
    rep.sgemm_gflops = o.sgemm_gflops;
  } else {
    log(fmt::format("sgemm {}^3 ({} threads)...", o.sgemm_n, rep.threads));
    rep.sgemm_gflops = SgemmGflops(rep.threads, o.sgemm_n, 5);
  }
  log(fmt::format("sgemm {}^3 (1 thread)...", o.sgemm_n));
  rep.sgemm_gflops_1thread = SgemmGflops(1, o.sgemm_n, 3);
  rep.notes.push_back(
      "attention FLOPs: n_heads * 4 * head_dim * L (L + 1) / 2 per call, for posenc and every baseline");
  rep.notes.push_back("attention row_path: CausalAttention (1 thread) on q/k rotated beforehand; naive_sgemm: per head "
                      "L x L scores (sgemm), causal softmax, sgemm with V, heads over the run's threads; pre-rotated inputs. "
                      "posenc's time includes RoPE on q and k.");

  const int64_t n = o.sgemm_n;
  std::vector<float> ga(static_cast<size_t>(n * n)), gb(ga.size()), gc(ga.size());
  {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1, 1);
    for (float& x : ga) x = u(rng);
    for (float& x : gb) x = u(rng);
  }
  for (const AttentionCase& c : cases) {
    log("case " + c.name + "...");
    Workload w(c);
    const int threads = rep.threads;
    // Validate: posenc against float64 on sampled rows; the baselines against posenc's output on the same rows.
    w.RunFlash();
    w.RunRow();
    w.RunNaive(threads);
    AttentionResult r;
    r.c = c;
    r.flops = AttentionFlops(c);
    const int64_t L = c.n_tokens;
    for (int64_t i : {int64_t{0}, L / 2, L - 1}) {
      for (int64_t h : {int64_t{0}, c.n_heads - 1}) {
        const double e = ErrorOverBound(w, w.out, i, h, FlashTiling{}.k_block);
        r.max_err_over_tol = std::max(r.max_err_over_tol, e);
        if (!(e <= 1.0)) {
          throw std::runtime_error(fmt::format("{}: posenc differs from the float64 reference at query {} head {} by "
                                               "{:.3g} x the derived bound", c.name, i, h, e));
        }
        for (const auto* other : {&w.out_row, &w.out_naive}) {
          // Each within its own bound of the reference (the row path's exp is 2 ulp: bound x 2 is ample).
          if (const double eo = ErrorOverBound(w, *other, i, h, 8); !(eo <= 2.0)) {
            throw std::runtime_error(fmt::format("{}: {} baseline differs from the float64 reference at query {} "
                                                 "head {} by {:.3g} x the bound", c.name,
                                                 other == &w.out_row ? "row_path" : "naive_sgemm", i, h, eo));
          }
        }
      }
    }
    r.scratch_bytes = w.flash_scratch.Bytes();
    r.scores_bytes = L * L * 4;

    // Time, interleaved; slow variants (a call over ~2 s) get fewer reps.
    auto timed = [](const std::function<void()>& f) {
      const auto t0 = Clock::now();
      f();
      return Seconds(t0, Clock::now());
    };
    std::vector<Variant> vs;
    vs.push_back({"posenc", [&] { w.RunFlash(); }, o.reps, {}});
    vs.push_back({"posenc_1thread",
                  [&] {
                    omp_set_num_threads(1);
                    w.RunFlash();
                    omp_set_num_threads(threads);
                  },
                  o.reps, {}});
    const double row_s = timed([&] { w.RunRow(); });
    const double naive_s = timed([&] { w.RunNaive(threads); });
    // sgemm n^3 interleaved with the cases' variants, so pct_of_sgemm compares calls made under the same load.
    vs.push_back({"sgemm",
                  [&] {
                    SetBlasThreads(threads);
                    GemmNT(n, n, n, ga.data(), n, gb.data(), n, gc.data(), n);
                    SetBlasThreads(1);
                  },
                  o.reps, {}});
    vs.push_back({"sgemm_1thread", [&] { GemmNT(n, n, n, ga.data(), n, gb.data(), n, gc.data(), n); }, o.reps, {}});
    vs.push_back({"row_path", [&] { w.RunRow(); }, row_s > 2.0 ? std::min(o.slow_reps, o.reps) : o.reps, {}});
    vs.push_back({"naive_sgemm", [&] { w.RunNaive(threads); }, naive_s > 2.0 ? std::min(o.slow_reps, o.reps) : o.reps, {}});
    for (int rep_i = 0; rep_i < o.reps; ++rep_i) {
      for (Variant& v : vs) {
        if (rep_i < v.reps) v.seconds.push_back(timed(v.fn));
      }
    }
    auto best = [](const Variant& v) { return *std::min_element(v.seconds.begin(), v.seconds.end()); };
    r.ns_per_call = best(vs[0]) * 1e9;
    r.ns_per_call_median = Median(vs[0].seconds) * 1e9;
    r.gflops = r.flops / best(vs[0]) * 1e-9;
    r.gflops_median = r.flops / Median(vs[0].seconds) * 1e-9;
    r.gflops_1thread = r.flops / best(vs[1]) * 1e-9;
    const double sgemm_flops = 2.0 * static_cast<double>(n) * n * n;
    r.sgemm_gflops = sgemm_flops / best(vs[2]) * 1e-9;
    r.sgemm_gflops_1thread = sgemm_flops / best(vs[3]) * 1e-9;
    for (size_t i = 4; i < vs.size(); ++i) {
      r.baselines[vs[i].name] = r.flops / best(vs[i]) * 1e-9;
      r.baseline_ns[vs[i].name] = best(vs[i]) * 1e9;
    }
    r.pct_of_sgemm = 100.0 * r.gflops / r.sgemm_gflops;
    r.pct_of_sgemm_1thread = 100.0 * r.gflops_1thread / r.sgemm_gflops_1thread;
    r.pct_of_run_sgemm = 100.0 * r.gflops / rep.sgemm_gflops;
    log(fmt::format("  {:.1f} GFLOP/s = {:.0f}% of sgemm", r.gflops, r.pct_of_sgemm));
    rep.results.push_back(std::move(r));
  }
  return rep;
}

nlohmann::json AttentionResultsJson(const AttentionBenchReport& rep) {
  nlohmann::json a = nlohmann::json::array();
  for (const AttentionResult& r : rep.results) {
    nlohmann::json e;
    e["kernel"] = "flash_causal_attention_rope";
    e["case"] = r.c.name;
    e["dtype"] = "f32";
    e["layout"] = r.c.layout == RopeLayout::kHalfSplit ? "half-split" : "interleaved";
    e["shape"] = {r.c.n_tokens, r.c.n_heads, r.c.head_dim};
    e["kv_heads"] = r.c.n_kv_heads;
    e["rotary_dim"] = r.c.rotary_dim;
    e["flops"] = r.flops;
    e["gflops"] = r.gflops;
    e["gflops_median"] = r.gflops_median;
    e["gflops_1thread"] = r.gflops_1thread;
    e["pct_of_sgemm"] = r.pct_of_sgemm;
    e["pct_of_sgemm_1thread"] = r.pct_of_sgemm_1thread;
    e["sgemm_gflops"] = r.sgemm_gflops;
    e["sgemm_gflops_1thread"] = r.sgemm_gflops_1thread;
    e["pct_of_run_sgemm"] = r.pct_of_run_sgemm;
    e["ns_per_call"] = r.ns_per_call;
    e["ns_per_call_median"] = r.ns_per_call_median;
    e["baselines"] = nlohmann::json::object();
    e["baseline_ns_per_call"] = nlohmann::json::object();
    e["ratios"] = nlohmann::json::object();
    for (const auto& [name, g] : r.baselines) {
      e["baselines"][name] = g;
      e["baseline_ns_per_call"][name] = r.baseline_ns.at(name);
      e["ratios"][name] = r.gflops / g;
    }
    e["scratch_bytes"] = r.scratch_bytes;
    e["scores_bytes"] = r.scores_bytes;
    e["max_err_over_tol"] = r.max_err_over_tol;
    a.push_back(e);
  }
  return a;
}

std::string FormatAttentionReport(const AttentionBenchReport& rep) {
  if (rep.results.empty()) return "";
  std::string s = fmt::format(
      "\nattention (FlashCausalAttention with RoPE, Highway target {}): OpenBLAS sgemm at the start {:.1f} GFLOP/s ({} "
      "threads), {:.1f} GFLOP/s (1 thread); %sgemm uses the sgemm calls interleaved with each case (sgemm column)\n"
      "FLOPs = n_heads * 4 * head_dim * L (L + 1) / 2 per call for every column\n\n",
      rep.hwy_target, rep.sgemm_gflops, rep.threads, rep.sgemm_gflops_1thread);
  s += fmt::format("{:<30} {:>8} {:>6} {:>7} {:>8} {:>6} {:>8} {:>8} {:>12} {:>8} {:>8} {:>7} {:>7} {:>10} {:>10} {:>7}\n",
                   "case", "GFLOP/s", "sgemm", "%sgemm", "GF/s 1t", "sgemm1t", "%sgemm1t", "%start", "ns/call", "row GF/s", "naive GF", "x row", "x naive",
                   "scratch", "L*L*4", "err/tol");
  for (const AttentionResult& r : rep.results) {
    const double row = r.baselines.count("row_path") ? r.baselines.at("row_path") : 0;
    const double naive = r.baselines.count("naive_sgemm") ? r.baselines.at("naive_sgemm") : 0;
    s += fmt::format("{:<30} {:>8.1f} {:>6.1f} {:>7.1f} {:>8.1f} {:>6.1f} {:>8.1f} {:>8.1f} {:>12.0f} {:>8.2f} {:>8.1f} "
                     "{:>7.1f} {:>7.2f} {:>9.1f}M {:>9.1f}M {:>7.1e}\n",
                     r.c.name, r.gflops, r.sgemm_gflops, r.pct_of_sgemm, r.gflops_1thread, r.sgemm_gflops_1thread,
                     r.pct_of_sgemm_1thread, r.pct_of_run_sgemm, r.ns_per_call, row,
                     naive, row > 0 ? r.gflops / row : 0, naive > 0 ? r.gflops / naive : 0,
                     static_cast<double>(r.scratch_bytes) / (1 << 20), static_cast<double>(r.scores_bytes) / (1 << 20),
                     r.max_err_over_tol);
  }
  for (const std::string& n : rep.notes) s += "note: " + n + "\n";
  return s;
}

}  // namespace posenc::bench
