// The MPI checks run by ctest under `mpirun --oversubscribe -np N` (CMakeLists.txt):
//   ring          ring attention over MPI on every rank's positions, gathered on rank 0 and compared with the
//                 same ranks simulated in one process (bit for bit) and with single-process CausalAttention
//                 (within the bound of tests/attention/ring_reference.h); data-parallel items gathered on rank 0
//                 bit-identical to one process; the same-options check passes.
//   mismatch      rank 1 runs with other options: every rank must report the disagreement naming the ranks.
//   short-window  a window shorter than the number of ranks: every rank must refuse it.
//   die, kill     rank 1 exits with status 3 without a word (die) or is killed by SIGKILL (kill) before the
//                 ring; the job must end with mpirun naming the rank, and the --out file must not appear
//                 (checked by expect_job_failure.sh).
//   hang          rank 1 sleeps instead of sending; rank 0 must stop after --timeout s naming rank 1 and abort
//                 the job, and the --out file must not appear.
// Exit status 0 when the check holds on this rank; messages go to stdout (rank 0) and stderr.
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "attention/ring_reference.h"
#include "posenc/attention/ring_attention.h"
#include "posenc/attention/ring_simulation.h"
#include "posenc/core/errors.h"
#include "posenc/dist/data_parallel.h"
#include "posenc/dist/fingerprint.h"
#include "posenc/dist/mpi/mpi_communicator.h"
#include "posenc/model/methods.h"

namespace posenc {
namespace {

struct Args {
  std::string mode;
  double timeout_s = 60.0;
  std::string out;  // written (atomically, by rank 0) only when the whole run succeeded
};

Args ParseArgs(int argc, char** argv) {
  Args a;
  if (argc < 2) throw ConfigError("usage: posenc_mpi_check ring|mismatch|short-window|die|kill|hang [--timeout S] [--out F]");
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--timeout") a.timeout_s = std::stod(argv[i + 1]);
    else if (flag == "--out") a.out = argv[i + 1];
    else throw ConfigError("unknown flag " + flag);
  }
  return a;
}

// Writes `text` to `path` through a temporary file and a rename, so the file is whole or absent.
void WriteAtomically(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(tmp);
    out << text;
    if (!out) throw IoError("cannot write " + tmp);
  }
  std::filesystem::rename(tmp, path);
}

struct RingCase {
  const char* name;
  RopeMethod method;
  RopeLayout layout;
  ContextSplitKind kind;
  int64_t n_tokens, l0;
  FlashTiling tiling;
};

// One ring case on every rank; rank 0 compares. Returns false (and says why) on a mismatch.
bool CheckRing(MpiCommunicator& comm, const RingCase& c, std::string& report) {
  const AttentionDims dims{4, 2, 16};
  const int64_t L = c.n_tokens, q_row = dims.n_heads * dims.head_dim, kv_row = dims.n_kv_heads * dims.head_dim;
  const MethodRope mr = BuildMethodRope(c.method, L, testing::RingTestConfig(dims, c.l0));
  testing::RingProblem pr = testing::MakeRingProblem(dims, L, 11);  // the whole window, the same on every rank
  pr.rope = {View(mr.table()), mr.pre_rotation(), c.layout};
  pr.mult = mr.softmax_scale_multiplier();
  const ContextSplit split = MakeContextSplit(L, comm.size(), c.kind);
  const auto& mine = split.ranges[static_cast<size_t>(comm.rank())];
  const int64_t n = split.Count(comm.rank());
  std::vector<float> q(static_cast<size_t>(n * q_row)), k(static_cast<size_t>(n * kv_row)),
      v(static_cast<size_t>(n * kv_row)), o(static_cast<size_t>(n * q_row));
  GatherPositionRows(mine, pr.q.data(), q_row, q_row, q.data());
  GatherPositionRows(mine, pr.k.data(), kv_row, kv_row, k.data());
  GatherPositionRows(mine, pr.v.data(), kv_row, kv_row, v.data());
  RingScratch scratch;
  RingCausalAttention(dims, split, {q.data(), q_row, k.data(), v.data(), kv_row}, pr.rope, pr.mult, o.data(), q_row,
                      comm, scratch, c.tiling);
  const auto all = comm.Gather(std::as_bytes(std::span<const float>(o)), 0);
  if (comm.rank() != 0) return true;
  std::vector<float> ring(static_cast<size_t>(L * q_row));
  for (int r = 0; r < comm.size(); ++r) {
    const auto& bytes = all[static_cast<size_t>(r)];
    std::vector<float> part(bytes.size() / sizeof(float));
    std::memcpy(part.data(), bytes.data(), bytes.size());
    if (static_cast<int64_t>(part.size()) != split.Count(r) * q_row) {
      report += fmt::format("{}: rank {} returned {} floats\n", c.name, r, part.size());
      return false;
    }
    ScatterPositionRows(split.ranges[static_cast<size_t>(r)], part.data(), q_row, ring.data(), q_row);
  }
  std::vector<float> simulated(ring.size());
  SimulateRingAttention(dims, split, {pr.q.data(), q_row, pr.k.data(), pr.v.data(), kv_row}, pr.rope, pr.mult,
                        simulated.data(), q_row, c.tiling);
  int64_t differ = 0;
  for (size_t e = 0; e < ring.size(); ++e) differ += std::memcmp(&ring[e], &simulated[e], sizeof(float)) != 0;
  const testing::RingCheck check = testing::CheckRingOutput(testing::ComputeRingReference(pr, split, c.tiling.k_block),
                                                            ring, testing::SingleProcessCausal(pr));
  report += fmt::format("{}: N = {}, {} elements differ from the in-process ring, {} outside the bound "
                        "(worst error / bound {:.3f}){}{}\n",
                        c.name, comm.size(), differ, check.bad, check.worst_ratio, check.bad ? ": " : "",
                        check.first_failure);
  return differ == 0 && check.bad == 0;
}

bool CheckDataParallel(MpiCommunicator& comm, std::string& report) {
  const int64_t n_items = 17;
  std::vector<double> costs(n_items);
  for (int64_t i = 0; i < n_items; ++i) costs[i] = static_cast<double>(1 + i % 3);
  auto item = [](int64_t i) {
    std::vector<double> v(static_cast<size_t>(2 + i % 4));
    for (size_t t = 0; t < v.size(); ++t) v[t] = std::exp(0.37 * static_cast<double>(i) + 0.11 * static_cast<double>(t)) / 7.0;
    return v;
  };
  const auto gathered = RunDataParallel(comm, costs, item);
  if (comm.rank() != 0) return true;
  bool ok = gathered.size() == static_cast<size_t>(n_items);
  for (int64_t i = 0; ok && i < n_items; ++i) {
    const std::vector<double> want = item(i);
    ok = gathered[i].size() == want.size() &&
         std::memcmp(gathered[i].data(), want.data(), want.size() * sizeof(double)) == 0;
  }
  report += fmt::format("data-parallel: {} items gathered on rank 0 {}\n", n_items,
                        ok ? "bit-identical to one process" : "DIFFER from one process");
  return ok;
}

uint64_t OptionsFingerprint(const std::string& options) { return Fingerprint().Add(options).value(); }

int Run(MpiSession& session, const Args& args) {
  MpiCommunicator comm(MPI_COMM_WORLD, args.timeout_s);
  const int rank = comm.rank();
  if (args.mode == "mismatch") {
    const std::string options = rank == 1 ? "--ctx 2048 --methods yarn" : "--ctx 4096 --methods yarn";
    try {
      CheckSameOnAllRanks(comm, OptionsFingerprint(options), "options and model file");
    } catch (const DistError& e) {
      const std::string want = "on ranks 0, 2; ";
      const bool ok = std::string(e.what()).find("ranks disagree on options and model file") != std::string::npos &&
                      std::string(e.what()).find(want) != std::string::npos;
      std::printf("%s\n", e.what());
      return ok ? 0 : 1;
    }
    std::printf("rank %d: different options were not detected\n", rank);
    return 1;
  }
  CheckSameOnAllRanks(comm, OptionsFingerprint(args.mode), "options and model file");
  if (args.mode == "short-window") {
    try {
      MakeContextSplit(comm.size() - 1, comm.size(), ContextSplitKind::kZigzag);
    } catch (const RangeError& e) {
      std::printf("rank %d: %s\n", rank, e.what());
      return std::string(e.what()).find("is shorter than the") != std::string::npos ? 0 : 1;
    }
    std::printf("rank %d: a window shorter than the ranks was accepted\n", rank);
    return 1;
  }
  if (args.mode == "die" && rank == 1) std::_Exit(3);  // no MPI_Finalize, no message: a crash
  if (args.mode == "kill" && rank == 1) std::raise(SIGKILL);  // killed from outside (OOM killer, scheduler)
  if (args.mode == "hang" && rank == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(60));
    return 1;
  }
  std::string report;
  bool ok = true;
  const RingCase cases[] = {
      {"yarn half-split zigzag", RopeMethod::kYarn, RopeLayout::kHalfSplit, ContextSplitKind::kZigzag, 77, 24, {}},
      {"dynamic (pre-rotation) interleaved contiguous", RopeMethod::kDynamic, RopeLayout::kInterleaved,
       ContextSplitKind::kContiguous, 61, 20, {5, 7}},
      {"dynamic (pre-rotation) half-split zigzag", RopeMethod::kDynamic, RopeLayout::kHalfSplit,
       ContextSplitKind::kZigzag, 61, 20, {}},
  };
  for (const RingCase& c : cases) ok = CheckRing(comm, c, report) && ok;
  if (args.mode == "ring") ok = CheckDataParallel(comm, report) && ok;
  if (rank == 0) {
    std::fputs(report.c_str(), stdout);
    if (ok && !args.out.empty()) WriteAtomically(args.out, report);
  }
  (void)session;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace posenc

int main(int argc, char** argv) {
  posenc::MpiSession session(&argc, &argv);
  int rc = 1;
  try {
    rc = posenc::Run(session, posenc::ParseArgs(argc, argv));
  } catch (const std::exception& e) {
    session.Abort(e.what());  // ends every rank; mpirun reports this one
  }
  std::fflush(stdout);
  return rc;
}
