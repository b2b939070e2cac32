// Times context-parallel ring attention over MPI for one window (run under mpirun; not part of ctest):
//   mpirun -np N build/posenc_mpi_ring_bench [--tokens 2048] [--heads 8] [--kv-heads 8] [--head-dim 128]
//                                            [--repeat 5] [--split zigzag|contiguous]
// Per repeat and rank: the ring call's wall time, the part spent computing, the part blocked waiting for a
// transfer after computing (transfer time not hidden), bytes sent, attended pairs; then the same exchanges
// without any compute (the transfer time alone). Overlap = 1 - wait / transfer-alone: the fraction of transfer
// time hidden behind compute. Baseline, same process: FlashCausalAttention of the whole window on one thread
// (rank 0). The result is checked once against the baseline before timing (within 1e-3 absolute).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "posenc/attention/flash_attention.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/attention/ring_simulation.h"
#include "posenc/blas/gemm.h"
#include "posenc/core/errors.h"
#include "posenc/dist/mpi/mpi_communicator.h"
#include "posenc/rope/cos_sin.h"

namespace posenc {
namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int64_t tokens = 2048, heads = 8, kv_heads = 8, head_dim = 128;
  int repeat = 5;
  ContextSplitKind split = ContextSplitKind::kZigzag;
};

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--tokens") o.tokens = std::stoll(v);
    else if (f == "--heads") o.heads = std::stoll(v);
    else if (f == "--kv-heads") o.kv_heads = std::stoll(v);
    else if (f == "--head-dim") o.head_dim = std::stoll(v);
    else if (f == "--repeat") o.repeat = std::stoi(v);
    else if (f == "--split") o.split = ParseContextSplit(v);
    else throw ConfigError("unknown flag " + f);
  }
  if (o.repeat < 1) throw ConfigError(fmt::format("--repeat must be >= 1, got {}", o.repeat));
  return o;
}

std::vector<float> Pseudo(size_t n, uint32_t seed) {  // deterministic inputs in [-1, 1)
  std::vector<float> x(n);
  uint32_t s = seed;
  for (float& f : x) {
    s = s * 1664525u + 1013904223u;
    f = static_cast<float>(s >> 8) / 8388608.0f - 1.0f;
  }
  return x;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int argc, char** argv) {
  MpiCommunicator comm;
  const Options o = Parse(argc, argv);
  SetBlasThreads(1);
  const AttentionDims dims{o.heads, o.kv_heads, o.head_dim};
  const int64_t L = o.tokens, q_row = o.heads * o.head_dim, kv_row = o.kv_heads * o.head_dim;
  const std::vector<float> q = Pseudo(static_cast<size_t>(L * q_row), 1), k = Pseudo(static_cast<size_t>(L * kv_row), 2),
                           v = Pseudo(static_cast<size_t>(L * kv_row), 3);
  std::vector<int64_t> pos(static_cast<size_t>(L));
  for (int64_t p = 0; p < L; ++p) pos[p] = p;
  RopeFrequencies f;
  for (int64_t i = 0; i < o.head_dim / 2; ++i) {
    f.inv_freq.push_back(static_cast<float>(std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(o.head_dim))));
  }
  const CosSinTable table = ComputeCosSin(f, pos);
  const RingRope rope{View(table), nullptr, RopeLayout::kHalfSplit};
  const ContextSplit split = MakeContextSplit(L, comm.size(), o.split);
  const int r = comm.rank(), n = comm.size();
  const int64_t n_local = split.Count(r);
  std::vector<float> ql(static_cast<size_t>(n_local * q_row)), kl(static_cast<size_t>(n_local * kv_row)),
      vl(static_cast<size_t>(n_local * kv_row)), out(static_cast<size_t>(n_local * q_row));
  GatherPositionRows(split.ranges[r], q.data(), q_row, q_row, ql.data());
  GatherPositionRows(split.ranges[r], k.data(), kv_row, kv_row, kl.data());
  GatherPositionRows(split.ranges[r], v.data(), kv_row, kv_row, vl.data());
  RingScratch scratch;
  const RingAttentionInputs in{ql.data(), q_row, kl.data(), vl.data(), kv_row};

  // Baseline (rank 0, one thread) and the check of the ring's output against it.
  std::vector<float> full(static_cast<size_t>(L * q_row));
  double baseline_s = 0;
  if (r == 0) {
    FlashScratch fs;
    const Clock::time_point t0 = Clock::now();
    FlashCausalAttention(dims, {q.data(), L, q_row, 0, k.data(), v.data(), L, kv_row},
                         {FlashRopeTarget::kQueriesAndKeys, View(table), RopeLayout::kHalfSplit}, 1.0f, full.data(),
                         q_row, fs);
    baseline_s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  comm.AllGather(0);
  RingCausalAttention(dims, split, in, rope, 1.0f, out.data(), q_row, comm, scratch);
  const auto parts = comm.Gather(std::as_bytes(std::span<const float>(out)), 0);
  if (r == 0) {
    std::vector<float> ring(full.size());
    for (int x = 0; x < n; ++x) {
      ScatterPositionRows(split.ranges[x], reinterpret_cast<const float*>(parts[x].data()), q_row, ring.data(), q_row);
    }
    double worst = 0;
    for (size_t e = 0; e < ring.size(); ++e) worst = std::max(worst, static_cast<double>(std::fabs(ring[e] - full[e])));
    if (!(worst <= 1e-3)) throw Error(fmt::format("ring output differs from the baseline by {}", worst));
  }

  // Timed repeats: the ring, then its exchanges alone.
  struct Row {
    double total, compute, wait, comm_only;
    int64_t bytes, pairs;
  };
  std::vector<Row> mine;
  std::vector<float> a(static_cast<size_t>(2 * split.MaxCount() * kv_row)), b(a.size());
  for (int rep = 0; rep < o.repeat; ++rep) {
    comm.AllGather(0);  // start together
    RingStats st;
    RingCausalAttention(dims, split, in, rope, 1.0f, out.data(), q_row, comm, scratch, {}, &st);
    // The same exchanges without compute, three times back to back; the fastest is the transfer time alone
    // (the others include waiting for a peer that the loaded machine had not scheduled yet).
    double comm_only = 1e30;
    for (int trial = 0; trial < 3; ++trial) {
      comm.AllGather(0);
      const Clock::time_point t0 = Clock::now();
      for (int step = 0; step + 1 < n; ++step) {
        const int src = (r - step + n) % n, next_src = (src - 1 + n) % n;
        comm.StartExchange(
            std::as_bytes(std::span<const float>(a.data(), static_cast<size_t>(2 * split.Count(src) * kv_row))),
            (r + 1) % n,
            std::as_writable_bytes(std::span<float>(b.data(), static_cast<size_t>(2 * split.Count(next_src) * kv_row))),
            (r - 1 + n) % n);
        comm.FinishExchange();
      }
      comm_only = std::min(comm_only, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    mine.push_back({st.total_s, st.compute_s, st.wait_s, comm_only, st.bytes_sent, st.pairs});
  }
  const auto all = comm.Gather(std::as_bytes(std::span<const Row>(mine)), 0);
  if (r != 0) return 0;
  std::printf("ring attention over MPI: N = %d, L = %lld, heads %lld/%lld, head_dim %lld, split %s, %d repeats\n", n,
              static_cast<long long>(L), static_cast<long long>(o.heads), static_cast<long long>(o.kv_heads),
              static_cast<long long>(o.head_dim), std::string(ContextSplitName(o.split)).c_str(), o.repeat);
  std::printf("baseline FlashCausalAttention, whole window, 1 thread (rank 0): %.4f s\n", baseline_s);
  std::vector<double> window;  // per repeat: the slowest rank's ring time
  for (int rep = 0; rep < o.repeat; ++rep) {
    double w = 0;
    for (int x = 0; x < n; ++x) w = std::max(w, reinterpret_cast<const Row*>(all[x].data())[rep].total);
    window.push_back(w);
  }
  std::printf("time per window (slowest rank): min %.4f  median %.4f  max %.4f s; baseline / median = %.2f\n",
              *std::min_element(window.begin(), window.end()), Median(window),
              *std::max_element(window.begin(), window.end()), baseline_s / Median(window));
  std::printf("rank  pairs         bytes_sent  total_s(min-max)  compute_s(min-max)  wait_s(min-max)  "
              "transfer_alone_s(med)  overlap(med)  GFLOP/s(med)\n");
  for (int x = 0; x < n; ++x) {
    const Row* rows = reinterpret_cast<const Row*>(all[x].data());
    std::vector<double> t, c, w, co, ov, gf;
    for (int rep = 0; rep < o.repeat; ++rep) {
      t.push_back(rows[rep].total);
      c.push_back(rows[rep].compute);
      w.push_back(rows[rep].wait);
      co.push_back(rows[rep].comm_only);
      ov.push_back(rows[rep].comm_only > 0 ? std::max(0.0, 1.0 - rows[rep].wait / rows[rep].comm_only) : 1.0);
      gf.push_back(static_cast<double>(rows[rep].pairs) * 4.0 * static_cast<double>(o.head_dim) / rows[rep].compute / 1e9);
    }
    auto mm = [](const std::vector<double>& x) {
      return fmt::format("{:.4f}-{:.4f}", *std::min_element(x.begin(), x.end()), *std::max_element(x.begin(), x.end()));
    };
    std::printf("%-4d  %-12lld  %-10lld  %-16s  %-18s  %-15s  %-21.5f  %-12.3f  %.1f\n", x,
                static_cast<long long>(rows[0].pairs), static_cast<long long>(rows[0].bytes), mm(t).c_str(),
                mm(c).c_str(), mm(w).c_str(), Median(co), Median(ov), Median(gf));
  }
  return 0;
}

}  // namespace
}  // namespace posenc

int main(int argc, char** argv) {
  posenc::MpiSession session(&argc, &argv);
  try {
    return posenc::Run(argc, argv);
  } catch (const std::exception& e) {
    session.Abort(e.what());
  }
}
